#include "client/csv.h"

#include <fmt/format.h>

namespace benchd::client {

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string StepsCsv(const v1::Job& job) {
  std::string out = std::string(kStepsCsvHeader) + "\n";
  // An attention job's passes are its steps (forward + backward, no optimizer).
  const auto& steps = job.result().has_attention() ? job.result().attention().passes()
                                                   : job.result().benchmark().steps();
  const std::string id = CsvField(job.id());
  for (const v1::StepTiming& s : steps) {
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", id, s.index(), s.warmup() ? "true" : "false",
                       s.step_seconds(), s.host_seconds(), s.forward_seconds(),
                       s.backward_seconds(), s.optimizer_seconds(), s.loss());
  }
  return out;
}

}  // namespace benchd::client
