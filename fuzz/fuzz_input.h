// Reading a fuzzer's bytes as fixed little-endian fields; past the end every
// read gives zeros, so every byte string is an input. The record formats of
// the analysis fuzzers are in their files; fuzz/make_seeds.py writes them.
#ifndef BENCHD_FUZZ_FUZZ_INPUT_H_
#define BENCHD_FUZZ_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace benchd::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t U8() { return static_cast<uint8_t>(Unsigned(1)); }
  int16_t I16() { return static_cast<int16_t>(Unsigned(2)); }
  int64_t I64() { return static_cast<int64_t>(Unsigned(8)); }
  double F64() {
    const uint64_t bits = Unsigned(8);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  // A u8 length, then that many bytes.
  std::string String() {
    const size_t n = U8();
    const size_t take = pos_ < size_ ? std::min(n, size_ - pos_) : 0;
    std::string s(reinterpret_cast<const char*>(data_ + pos_), take);
    pos_ += n;
    return s;
  }

 private:
  uint64_t Unsigned(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i, ++pos_) {
      if (pos_ < size_) v |= static_cast<uint64_t>(data_[pos_]) << (8 * i);
    }
    return v;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace benchd::fuzz

#endif  // BENCHD_FUZZ_FUZZ_INPUT_H_
