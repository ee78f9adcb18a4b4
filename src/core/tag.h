// Message tags, as transports see them: 64 bits that both ends of a message
// must agree on. The progress engine makes them (src/exec/op.cc: the
// collective, its datatype, op, a hash of count and root, and its sequence
// number) and registers how to print one, so that a transport reporting a
// mismatched message can say what each side called without knowing the
// layout.
#pragma once

#include <cstdint>
#include <string>

namespace weft {

using TagDescriber = std::string (*)(uint64_t tag);
// Installed once by the layer that makes tags.
void setTagDescriber(TagDescriber d);
// "allreduce #12 (float32, sum, count/root 3fa1)", or "tag 0x..." when no
// describer is installed.
std::string describeTag(uint64_t tag);

}  // namespace weft
