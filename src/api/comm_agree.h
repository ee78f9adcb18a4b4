// A setting every rank of a communicator must share (the reproducibility
// mode, the wire format): each rank's request, read from the environment or
// the config, travels in the init blob; a request that names nothing, or
// ranks that differ, fail init on every rank, naming both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace weft {

struct SharedSetting {
  const char* what;      // "reproducibility mode"
  const char* var;       // "WEFT_REPRO"
  const char* expected;  // "off, ordered or exact"
  uint64_t invalid;      // the request that names nothing
  const char* (*name)(uint64_t request);
};

// OK when this rank's `mine` is valid and equal to every rank's `all[r]`.
// `env`: the variable's value as read, for the message of an invalid one.
Status agreeOnSetting(const SharedSetting& s, const std::string& env, uint64_t mine,
                      const std::vector<uint64_t>& all, int rank);

}  // namespace weft
