// The host functions of nccl_device.h, NCCL's device-initiated API (CUDA
// kernels that communicate through symmetric memory). weft has no CUDA
// support yet, so the functions that set up device communicators and their
// resources return ncclInvalidUsage. The team queries are plain arithmetic
// and are real: with no load/store-accessible (NVLink) peers, each rank's
// LSA team is itself alone, and the rail team is then the whole world.
// nccl.h first: nccl_device.h relies on what it includes.
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "shim/shim.h"

using namespace weft::shim;

namespace {

const char* const kNoDeviceApi =
    "the device-initiated API needs CUDA kernels and symmetric memory, and this weft has no "
    "CUDA support yet";

ncclTeam_t team(int nRanks, int rank, int stride) {
  ncclTeam_t t;
  t.nRanks = nRanks;
  t.rank = rank;
  t.stride = stride;
  return t;
}

}  // namespace

// nccl_device.h declares only the nccl* names; their pnccl* twins are ours.
// ncclTeamWorld and friends are also C++ overloads there, so each pair is
// spelled out instead of taken with __typeof__.
extern "C" {
ncclResult_t pncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*);
ncclResult_t pncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*);
ncclTeam_t pncclTeamWorld(ncclComm_t);
ncclTeam_t pncclTeamLsa(ncclComm_t);
ncclTeam_t pncclTeamRail(ncclComm_t);
int pncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int);
int pncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                              ncclDevResourceRequirements_t*);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                              ncclDevResourceRequirements_t*);
int pncclLLA2ACalcSlots(int, int);
ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*,
                                         ncclDevResourceRequirements_t*);

ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                ncclDevComm_t* outDevComm) {
  (void)reqs;
  (void)outDevComm;
  return unsupported(lookup(comm).get(), "ncclDevCommCreate", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclDevCommCreate)

ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  (void)devComm;
  return unsupported(lookup(comm).get(), "ncclDevCommDestroy", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclDevCommDestroy)

// A bad comm gives an empty team (and the last error says why): these
// functions have no result code.
ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  CommRef c;
  if (acquire(comm, "ncclTeamWorld", &c) != ncclSuccess) return team(0, 0, 0);
  return team(c->nranks, c->rank, 1);
}
extern "C" ncclTeam_t ncclTeamWorld(ncclComm_t) __attribute__((weak, alias("pncclTeamWorld")));

ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  CommRef c;
  if (acquire(comm, "ncclTeamLsa", &c) != ncclSuccess) return team(0, 0, 0);
  return team(1, 0, 1);
}
extern "C" ncclTeam_t ncclTeamLsa(ncclComm_t) __attribute__((weak, alias("pncclTeamLsa")));

ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  CommRef c;
  if (acquire(comm, "ncclTeamRail", &c) != ncclSuccess) return team(0, 0, 0);
  return team(c->nranks, c->rank, 1);  // the LSA team's outer factor, LSA size 1
}
extern "C" ncclTeam_t ncclTeamRail(ncclComm_t) __attribute__((weak, alias("pncclTeamRail")));

// Rank `rank` of team `tm`, counted in the world (or the LSA team): teams
// are strided subsets that contain this rank at tm.rank.
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t tm, int rank) {
  CommRef c;
  if (acquire(comm, "ncclTeamRankToWorld", &c) != ncclSuccess) return -1;
  return c->rank + (rank - tm.rank) * tm.stride;
}
extern "C" int ncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int)
    __attribute__((weak, alias("pncclTeamRankToWorld")));

int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t tm, int rank) {
  CommRef c;
  if (acquire(comm, "ncclTeamRankToLsa", &c) != ncclSuccess) return -1;
  return 0 + (rank - tm.rank) * tm.stride;  // this rank is LSA rank 0
}
extern "C" int ncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int)
    __attribute__((weak, alias("pncclTeamRankToLsa")));

ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                              ncclDevResourceRequirements_t*) {
  return unsupported(nullptr, "ncclLsaBarrierCreateRequirement", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)

ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t, int,
                                              ncclGinBarrierHandle_t*,
                                              ncclDevResourceRequirements_t*) {
  return unsupported(lookup(comm).get(), "ncclGinBarrierCreateRequirement", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclGinBarrierCreateRequirement)

// No LL all-to-all buffers without the device API: 0 slots, and the last
// error says why.
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  (void)maxElts;
  (void)maxEltSize;
  unsupported(nullptr, "ncclLLA2ACalcSlots", kNoDeviceApi);
  return 0;
}
WEFT_NCCL_ALIAS(ncclLLA2ACalcSlots)

ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*,
                                         ncclDevResourceRequirements_t*) {
  return unsupported(nullptr, "ncclLLA2ACreateRequirement", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclLLA2ACreateRequirement)

#if NCCL_VERSION_CODE >= 23000
ncclResult_t pncclCommQueryProperties(ncclComm_t, ncclCommProperties_t*);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t, size_t, ncclMultimemHandle_t, void**);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void**);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**);

// What the communicator offers: no device API, no multimem, no GPU-initiated
// networking; host-initiated one-sided calls (ncclPutSignal on host windows,
// window.cc) are there. Fields past props->size (an older caller) are left.
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  const char* fn = "ncclCommQueryProperties";
  CommRef c;
  if (ncclResult_t r = acquire(comm, fn, &c); r != ncclSuccess) return r;
  if (!props || props->size < offsetof(ncclCommProperties_t, rank))
    return setError(c.get(), ncclInvalidArgument,
                    std::string(fn) + ": props is NULL or not set up with "
                                      "NCCL_COMM_PROPERTIES_INITIALIZER");
  ncclCommProperties_t p = NCCL_COMM_PROPERTIES_INITIALIZER;
  p.rank = c->rank;
  p.nRanks = c->nranks;
  p.cudaDev = c->cudaDev;
  p.nvmlDev = c->cudaDev;
  p.deviceApiSupport = false;
  p.multimemSupport = false;
  p.ginType = NCCL_GIN_TYPE_NONE;
  p.nLsaTeams = c->nranks;  // LSA teams of one rank each (ncclTeamLsa)
  p.hostRmaSupport = true;
  p.railedGinType = NCCL_GIN_TYPE_NONE;
  const size_t n = props->size < sizeof p ? props->size : sizeof p;
  const size_t head = offsetof(ncclCommProperties_t, rank);
  memcpy(reinterpret_cast<char*>(props) + head, reinterpret_cast<const char*>(&p) + head, n - head);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclCommQueryProperties)

namespace {
const char* const kNoDevicePointer =
    "weft's windows are host memory (window.cc): there is no device pointer into a peer's or a "
    "multicast window";
}  // namespace

ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return unsupported(nullptr, "ncclGetLsaMultimemDevicePointer", kNoDevicePointer);
}
WEFT_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer)

ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t, size_t, ncclMultimemHandle_t,
                                           void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return unsupported(nullptr, "ncclGetMultimemDevicePointer", kNoDevicePointer);
}
WEFT_NCCL_ALIAS(ncclGetMultimemDevicePointer)

ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return unsupported(nullptr, "ncclGetLsaDevicePointer", kNoDevicePointer);
}
WEFT_NCCL_ALIAS(ncclGetLsaDevicePointer)

ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void** outPtr) {
  if (outPtr) *outPtr = nullptr;
  return unsupported(nullptr, "ncclGetPeerDevicePointer", kNoDevicePointer);
}
WEFT_NCCL_ALIAS(ncclGetPeerDevicePointer)

// NCCL's Linux library exports these two GIN scratch functions, whose
// declarations live in device headers the nvidia-nccl wheel does not ship
// (only a Windows stub declares them there): declared here with the handle
// types opaque (C linkage, same symbol), so the export list stays NCCL's.
ncclResult_t pncclGinOutboxCreateRequirement(int, int, void*, ncclDevResourceRequirements_t*);
ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, void*,
                                               ncclDevResourceRequirements_t*);

ncclResult_t pncclGinOutboxCreateRequirement(int, int, void*, ncclDevResourceRequirements_t*) {
  return unsupported(nullptr, "ncclGinOutboxCreateRequirement", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclGinOutboxCreateRequirement)

ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, void*,
                                               ncclDevResourceRequirements_t*) {
  return unsupported(nullptr, "ncclGinInboxA2ACreateRequirement", kNoDeviceApi);
}
WEFT_NCCL_ALIAS(ncclGinInboxA2ACreateRequirement)
#endif  // NCCL_VERSION_CODE >= 23000

}  // extern "C"
