// weft_op_create_wire: a per-call choice of wire format (docs/compression.md).
// The op's value encodes its base op and format (comm.h, kWireOpBase), so
// api_coll.cc's check() decodes it without a table; this only validates.
#include "api/api_state.h"

using namespace weft;

extern "C" weft_result_t weft_op_create_wire(weft_op_t* op, weft_op_t base, weft_wire_t wire,
                                             weft_comm_t comm) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  const int b = static_cast<int>(base), w = static_cast<int>(wire);
  if (!op) return setError(c.get(), invalidArgument("weft_op_create_wire: op is NULL"));
  if (b != WEFT_SUM && b != WEFT_AVG)
    return setError(c.get(), invalidArgument(strFormat(
                                 "weft_op_create_wire: base op %d is not WEFT_SUM or WEFT_AVG "
                                 "(only sums are rounded hop by hop with a bounded error)",
                                 b)));
  if (w < WEFT_WIRE_NONE || w > WEFT_WIRE_FP16)
    return setError(c.get(), invalidArgument(strFormat(
                                 "weft_op_create_wire: wire %d is not WEFT_WIRE_NONE, _BF16 or "
                                 "_FP16",
                                 w)));
  *op = static_cast<weft_op_t>(kWireOpBase | (w - WEFT_WIRE_NONE) << 8 | b);
  return WEFT_SUCCESS;
}
