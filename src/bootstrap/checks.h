// The bootstrap's checks of what arrives from the network, as pure
// functions: the root's check of a rank's hello, a rank's check of its ring
// predecessor's hello, and of the rank table in the root's reply. root.cc
// and bootstrap.cc call them on every message; tests/fuzz/fuzz_bootstrap.cc
// feeds them arbitrary bytes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "core/hmac.h"
#include "net/socket.h"

namespace weft {
namespace boot {

// Whether `h` answers the challenge `rootNonce` under `key`.
bool rootHelloAuthentic(const RootHello& h, const Key& key, const uint8_t* rootNonce);

// Why the root refuses hello `h` ("" when it takes it): magic, version,
// MAC, nranks (in [1, kMaxRanks] and equal to `nranks` once one is known,
// i.e. > 0), rank in range and not `taken`, a valid ring address.
std::string checkRootHello(const RootHello& h, const Key& key, const uint8_t* rootNonce,
                           int nranks, const std::function<bool(int)>& taken);

// Why rank `prev`'s ring hello `h` is refused by its successor ("" when
// it is right): version, MAC bound to the session, nranks, rank.
std::string checkRingHello(const RingHello& h, const Key& key, const Nonce& session, int nranks,
                           int prev);

// A successful reply's payload (the session nonce, then `nranks` packed
// addresses): "" and *session, *table filled, or why it is malformed.
std::string parseRankTable(const std::string& payload, int nranks, Nonce* session,
                           std::vector<net::Address>* table);

}  // namespace boot
}  // namespace weft
