// Fuzz target: the unique id (weft_unique_id_t, 128 bytes a launcher passes
// between processes) and the packed socket address inside it and in every
// bootstrap hello and rank table (net::Address::unpack).
//
// Checks: decodeUniqueId and Address::unpack never read past their input
// and never crash; a decoded id's address unpacks; and the packed address
// is canonical: pack(unpack(x)) == x, so one address has one encoding and a
// second decode gives the same address.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "net/socket.h"
#include "weft.h"

using weft::net::Address;

namespace {

void checkAddress(const unsigned char* in) {
  Address a;
  if (!Address::unpack(in, &a)) return;
  unsigned char again[Address::kPackedSize];
  a.pack(again);
  if (memcmp(again, in, sizeof again) != 0) abort();  // not canonical
  Address b;
  if (!Address::unpack(again, &b) || b.len != a.len || memcmp(&a.ss, &b.ss, a.len) != 0) abort();
  (void)a.toString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft_unique_id_t id;
  memset(&id, 0, sizeof id);
  memcpy(id.internal, data, size < sizeof id.internal ? size : sizeof id.internal);
  weft::UniqueIdData d;
  memset(&d, 0xa5, sizeof d);
  weft::Status st = weft::decodeUniqueId(id, &d);
  if (st.isOk()) {
    Address root;
    if (!Address::unpack(d.rootAddr, &root)) abort();  // accepted an id it cannot use
    if (memcmp(&d, id.internal, sizeof d) != 0) abort();
  }
  checkAddress(reinterpret_cast<const unsigned char*>(id.internal) +
               offsetof(weft::UniqueIdData, rootAddr));
  // The address alone, from the start of the input (hellos, rank tables).
  unsigned char packed[Address::kPackedSize] = {0};
  memcpy(packed, data, size < sizeof packed ? size : sizeof packed);
  checkAddress(packed);
  return 0;
}
