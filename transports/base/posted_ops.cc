// PeerState, mismatchError and the peer descriptions every transport's
// errors share (posted_ops.h).
#include "transports/base/posted_ops.h"

#include "core/tag.h"

namespace weft {

bool PeerState::fail(const Status& st) {
  if (!failed_.isOk()) return false;
  failed_ = st;
  WEFT_LOG(failLevel_, kTransport, "%s transport: rank %d: %s", transport_, rank_,
           st.message().c_str());
  return true;
}

void PeerState::setMemory(bool host, bool device, std::string whyNot) {
  host_ = host;
  device_ = device;
  whyNot_ = std::move(whyNot);
}

Status PeerState::checkPost(MemType mem) const {
  if (aborted_) return Status(WEFT_ERR_ABORTED, strFormat("%s transport: shut down", transport_));
  if (!failed_.isOk()) return failed_;
  if (!moves(mem)) {
    if (!whyNot_.empty()) return invalidArgument(whyNot_);
    return invalidArgument(strFormat("%s transport: %s memory is not supported", transport_,
                                     mem == MemType::Host ? "host" : "device"));
  }
  return Status::ok();
}

Status mismatchError(const char* transport, int rank, int peer, const std::string& peerDesc,
                     uint64_t msgNo, MsgSig recv, MsgSig sent) {
  const std::string recvCall = describeTag(recv.tag), sentCall = describeTag(sent.tag);
  const auto no = static_cast<unsigned long long>(msgNo);
  const auto recvLen = static_cast<unsigned long long>(recv.len);
  const auto sentLen = static_cast<unsigned long long>(sent.len);
  if (peer == rank)
    return invalidUsage(strFormat(
        "mismatched messages of rank %d to itself, %s message #%llu: receive of %s (%llu bytes), "
        "send of %s (%llu bytes)",
        rank, transport, no, recvCall.c_str(), recvLen, sentCall.c_str(), sentLen));
  const std::string who = peerDesc.empty() ? strFormat("rank %d", peer) : peerDesc;
  return invalidUsage(strFormat(
      "mismatched collectives between rank %d and %s, %s message #%llu: rank %d called %s "
      "(%llu bytes), rank %d called %s (%llu bytes)",
      rank, who.c_str(), transport, no, rank, recvCall.c_str(), recvLen, peer, sentCall.c_str(),
      sentLen));
}

Status peerReportedMismatch(const char* transport, int rank, const std::string& peerDesc) {
  return invalidUsage(
      strFormat("%s reported a mismatched message from rank %d (%s; mismatched collectives?)",
                peerDesc.c_str(), rank, transport));
}

std::string describePeer(int rank, int pid, const std::string& host) {
  return strFormat("rank %d (pid %d on host %s)", rank, pid,
                   host.empty() ? "localhost" : host.c_str());
}

}  // namespace weft
