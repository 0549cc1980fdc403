// A text-format parser's error collector that keeps nothing: a fuzz target
// only cares that parsing ends, not why an input is malformed.
#pragma once

#include <string>

#include "google/protobuf/io/tokenizer.h"

namespace kevo::fuzz {

class QuietErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

}  // namespace kevo::fuzz
