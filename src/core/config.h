// Config: every knob weft reads from the environment, in one table, so that
// WEFT_DEBUG=INFO can print the ones in effect and docs/env.md can list them.
// Values are read when a communicator is created (tests set them at run time).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace weft {

// Tensor fusion's default buffer size (docs/performance.md, "Tensor fusion").
constexpr size_t kDefaultFusionThreshold = 1 << 20;

struct Config {
  double timeoutS = 300;           // WEFT_TIMEOUT_S: any collective / wait
  double bootstrapTimeoutS = 120;  // WEFT_BOOTSTRAP_TIMEOUT_S: rendezvous and connect
  double shrinkTimeoutS = 30;      // WEFT_SHRINK_TIMEOUT_S: a shrink's wait for a silent rank
  std::string transports;          // WEFT_TRANSPORTS: "tcp", "shm,tcp", "^shm"
  std::string socketIfname;        // WEFT_SOCKET_IFNAME: interface prefix, "^lo" excludes
  int nsocksPerPeer = 2;           // WEFT_NSOCKS_PER_PEER: TCP streams per peer
  size_t socketBufBytes = 4 << 20; // WEFT_SOCKET_BUF_BYTES: SO_SNDBUF/SO_RCVBUF; 0 = kernel
  size_t chunkBytes = 0;           // WEFT_CHUNK_BYTES: 0 = transport's preferred
  size_t shmSlotBytes = 1 << 20;   // WEFT_SHM_SLOT_BYTES: one slot of a shm FIFO
  int shmSlots = 8;                // WEFT_SHM_SLOTS: slots per shm FIFO
  std::string algo;                // WEFT_ALGO: algorithm override (see docs/tuning.md)
  std::string repro;               // WEFT_REPRO: off | ordered | exact (docs/reproducibility.md)
  size_t fusionThreshold = kDefaultFusionThreshold;  // WEFT_FUSION_THRESHOLD: 0 = no fusion
  std::string wire;                // WEFT_WIRE: none | bf16 | fp16 (docs/compression.md)
  size_t shmArenaChunk = 1 << 20;  // WEFT_SHM_ARENA_CHUNK: bytes per arena round; 0 = no arena
  size_t shmDirectMin = 64 << 10;  // WEFT_SHM_DIRECT_MIN: single-copy bcast/allgather from; 0 = off
  bool shmDirectMinSet = false;    // WEFT_SHM_DIRECT_MIN was set (also with ranks sharing cores)
  long spinUs = -1;                // WEFT_SPIN_US: spin before sleeping; -1 = auto
  std::string ibHca;               // WEFT_IB_HCA: RDMA devices/ports, NCCL_IB_HCA syntax
  int ibGidIndex = -1;             // WEFT_IB_GID_INDEX: RoCE GID index; -1 = auto
  int ibQpsPerPeer = 2;            // WEFT_IB_QPS_PER_PEER: RC queue pairs per peer
  std::string netGdr;              // WEFT_NET_GDR: auto (""), 0, 1
  bool ucxFastRndv = false;        // WEFT_UCX_FAST_RNDV: bulk endpoint without peer failure mode
  std::string cudaLocalWork;       // WEFT_CUDA_LOCAL_WORK: stream calls' local steps: host | gpu
  std::string cudaIpc;             // WEFT_CUDA_IPC: cuda_ipc between one host's ranks: auto | on | off
  std::string topoFile;            // WEFT_TOPO_FILE: load this topology instead of detecting
  std::string topoDumpFile;        // WEFT_TOPO_DUMP_FILE: write the topology used here

  // Telemetry (src/telemetry/, docs/telemetry.md).
  bool telemetry = true;           // WEFT_TELEMETRY: per-op records; 0 turns them off
  std::string timelinePath;        // WEFT_TIMELINE: Chrome-trace file, %r = rank
  std::string statsPath;           // WEFT_STATS: per-rank stats file, %r = rank
  double statsIntervalS = 0;       // WEFT_STATS_INTERVAL_S: rewrite it this often; 0 = at destroy
  double stallWarnS = 60;          // WEFT_STALL_WARN_S: report an op pending this long
  int flightRecorder = 0;          // WEFT_FLIGHT_RECORDER: last N ops dumped on timeout/abort
  std::string flightRecorderPath;  // WEFT_FLIGHT_RECORDER_FILE: there instead of the log, %r = rank
  double testThrottleMBps = 0;     // WEFT_TEST_THROTTLE_MBPS: test builds: cap sends per rank
  long testAsyncLocalUs = -1;      // WEFT_TEST_ASYNC_LOCAL_US: test builds: local steps on a worker
  std::string testFaults;          // WEFT_TEST_FAULTS: test builds: faults to inject (fault_plan.h)
  uint64_t testFaultSeed = 1;      // WEFT_TEST_FAULT_SEED: test builds: their random draws

  // Reads every WEFT_* variable; unknown values fall back to defaults with a warning.
  static Config fromEnv();
  // "NAME=value" of each variable set in the environment, for INFO logs.
  static std::vector<std::string> variablesInEffect();
  // Every variable of this config, set or not, with the value in effect
  // ("" for an unset string; numbers as fromEnv parsed them): the NCCL
  // shim's parameter API (ncclParamGet*) reads weft's settings here.
  std::vector<std::pair<std::string, std::string>> entries() const;
};

// Parses "4M", "64K", "1G", "123" into bytes; returns false on garbage.
bool parseBytes(const std::string& s, size_t* out);

}  // namespace weft
