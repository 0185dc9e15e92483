// Protobuf messages as JSON. One convention everywhere in benchctl: proto3's
// canonical JSON (lowerCamelCase names, enums by name, int64 as strings) with
// default-valued fields printed, so consumers see every field.
#ifndef BENCHD_CLIENT_JSON_H_
#define BENCHD_CLIENT_JSON_H_

#include <string>
#include <vector>

#include "google/protobuf/message.h"

namespace benchd::client {

// Indented, ending in one '\n'.
std::string ToJson(const google::protobuf::Message& message);
// One line ending in '\n' (for NDJSON streams).
std::string ToJsonLine(const google::protobuf::Message& message);
// An object with one field holding the messages as an array, indented like
// ToJson: {"jobs": [{...}, {...}]}.
std::string ToJsonField(const std::string& name,
                        const std::vector<const google::protobuf::Message*>& messages);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_JSON_H_
