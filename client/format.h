// Number and time formatting shared by every human-readable view.
#ifndef BENCHD_CLIENT_FORMAT_H_
#define BENCHD_CLIENT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace benchd::client {

// 1234567 -> "1,234,567".
std::string FormatThousands(int64_t value);
// Seconds as milliseconds with 3 decimals: 0.0123456 -> "12.346".
std::string FormatMs(double seconds);
// Seconds with 2 decimals and a unit: "1.23 s".
std::string FormatSeconds(double seconds);
// Bytes in GiB (2^30) with 2 decimals, no unit: "12.34".
std::string FormatGiB(int64_t bytes);
// Bytes in the largest IEC unit that keeps a value of at least 1: "3.47 MiB".
std::string FormatBytes(int64_t bytes);
// A ratio as a percentage with 2 decimals: 0.0123 -> "1.23%".
std::string FormatPercent(double ratio);
// Throughput-like values that span orders of magnitude: 3 significant digits
// below 100 ("0.00123", "12.3"), whole-number thousands above ("41,234").
std::string FormatRate(double value);
// "2026-11-22 07:40:01" in UTC, or "-" for an unset timestamp.
std::string FormatTime(const google::protobuf::Timestamp& t);
// Seconds from a to b, or a negative value when either is unset.
double SecondsBetween(const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b);
// A google.rpc.Code number as its name: 8 -> "RESOURCE_EXHAUSTED".
std::string CodeName(int code);
// "SUCCEEDED", "QUEUED", ... (the enum value without its JOB_STATE_ prefix).
std::string StateName(v1::JobState state);
// "up", "starting", "down"; "-" when unspecified.
std::string WorkerStateName(v1::WorkerState state);
// "-" for an empty string.
std::string OrDash(const std::string& s);
// "benchmark", "collective", ... ("-" when the job says none).
std::string JobKindText(const v1::Job& job);
// {"a", "b", "c"} -> "a, b or c", for "expected ..." in error and help texts.
std::string ChoicesText(const std::vector<std::string>& choices);
// "cuda:0", or a collective's "cpu:0,cpu:1" ("-" before it has any).
std::string JobDevicesText(const v1::Job& job);
// "benchd 0.1.0, torch 2.11.0, CUDA 13.0 (driver 13.0), cuDNN 9.1, NCCL 2.28"; parts
// that are empty are left out.
std::string FormatVersions(const v1::Versions& v);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_FORMAT_H_
