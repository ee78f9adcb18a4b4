// The communicator's wire format (WEFT_WIRE, weft_config_t's wire;
// docs/compression.md): read on each rank, exchanged at init with the peer
// information and agreed on, since ranks sending different formats would
// post different message lengths. Which calls it applies to: wireFor.
#include <cstring>

#include "api/comm.h"
#include "api/comm_agree.h"
#include "kernels/cpu/wire.h"

namespace weft {

namespace {
constexpr uint64_t kNotAFormat = 0xff;

const char* requestName(uint64_t v) {
  return v == kNotAFormat ? "not a format" : wireName(static_cast<Wire>(v));
}
}  // namespace

bool configHasWire(const weft_config_t* config) {
  return config && config->size >= offsetof(weft_config_t, wire) + sizeof(config->wire);
}

uint64_t wireRequest(const std::string& env, const weft_config_t* config) {
  if (configHasWire(config) && config->wire != WEFT_WIRE_DEFAULT)
    return static_cast<uint64_t>(config->wire - WEFT_WIRE_NONE);
  Wire w = Wire::None;
  return parseWire(env.c_str(), &w) ? static_cast<uint64_t>(w) : kNotAFormat;
}

Status Comm::agreeOnWire(const std::vector<uint64_t>& requests) {
  static const SharedSetting kWire{"wire format", "WEFT_WIRE", "none, bf16 or fp16", kNotAFormat,
                                   requestName};
  WEFT_RETURN_IF_ERROR(agreeOnSetting(kWire, cfg_.wire, wireRequest_, requests, rank_));
  wire_ = static_cast<Wire>(wireRequest_);
  return Status();
}

bool decodeWireOp(int op, weft_op_t* base, Wire* wire) {
  if (!isWireOp(op)) return false;
  const int b = op & 0xff, w = (op >> 8) & 0xff;
  if ((op & ~0xffff) != kWireOpBase || (b != WEFT_SUM && b != WEFT_AVG) ||
      w > static_cast<int>(Wire::Fp16))
    return false;
  *base = static_cast<weft_op_t>(b);
  *wire = static_cast<Wire>(w);
  return true;
}

// Float32 sums only: the format carries float32 values, and only a sum (AVG
// is a sum then a division) is computed on partial results that may be
// rounded hop by hop with a bounded error. PROD, MIN, MAX, other datatypes,
// and collectives that only move data run uncompressed.
Wire Comm::wireFor(Wire asked, CollType t, weft_datatype_t dt, weft_op_t op) {
  const bool reduces =
      t == CollType::AllReduce || t == CollType::Reduce || t == CollType::ReduceScatter;
  if (!reduces || dt != WEFT_FLOAT32 || (op != WEFT_SUM && op != WEFT_AVG)) return Wire::None;
  return asked;
}

}  // namespace weft
