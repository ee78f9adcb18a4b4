// The host functions of nccl_device.h, NCCL's device-initiated API (CUDA
// kernels that communicate through symmetric memory). weft has no CUDA
// support yet, so the functions that set up device communicators and their
// resources return ncclInvalidUsage. The team queries are plain arithmetic
// and are real: with no load/store-accessible (NVLink) peers, each rank's
// LSA team is itself alone, and the rail team is then the whole world.
// nccl.h first: nccl_device.h relies on what it includes.
#include <nccl.h>
#include <nccl_device.h>

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

}  // extern "C"
