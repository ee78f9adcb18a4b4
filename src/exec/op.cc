#include "exec/op.h"

#include "core/status.h"
#include "kernels/cpu/reduce.h"

namespace weft {

uint64_t opTag(CollType type, uint64_t seq) {
  if (type == CollType::Send || type == CollType::Recv) return 0xFEull;
  return (seq << 8) | static_cast<uint64_t>(type);
}

std::string Op::describe() const { return describeOp(args, dtype, seq); }

std::string describeOp(const CollArgs& args, weft_datatype_t dtype, uint64_t seq) {
  std::string s = collName(args.type);
  if (args.type == CollType::Send || args.type == CollType::Recv)
    return s + strFormat(" (%zu x %s, peer %d)", args.count, datatypeName(dtype), args.peer);
  s += strFormat(" #%llu", static_cast<unsigned long long>(seq));
  if (args.type == CollType::Barrier) return s;
  s += strFormat(" (%zu x %s", args.count, datatypeName(dtype));
  if (args.type == CollType::AllReduce || args.type == CollType::Reduce ||
      args.type == CollType::ReduceScatter)
    s += strFormat(", %s", opName(args.op));
  if (args.type == CollType::Broadcast || args.type == CollType::Reduce)
    s += strFormat(", root %d", args.root);
  return s + ")";
}

}  // namespace weft
