// The communicator's reproducibility mode (WEFT_REPRO, weft_config_t's
// repro; docs/reproducibility.md): read on each rank, exchanged at init
// with the peer information, and agreed on, since ranks computing with
// different modes would run different schedules.
#include <cstring>

#include "api/comm.h"
#include "api/comm_agree.h"
#include "core/log.h"
#include "kernels/cpu/fold.h"

namespace weft {

namespace {
constexpr uint64_t kNotAMode = 0xff;

const char* requestName(uint64_t v) {
  return v == kNotAMode ? "not a mode" : reproName(static_cast<Repro>(v));
}
}  // namespace

bool configHasRepro(const weft_config_t* config) {
  return config && config->size >= offsetof(weft_config_t, repro) + sizeof(config->repro);
}

uint64_t reproRequest(const std::string& env, const weft_config_t* config) {
  if (configHasRepro(config) && config->repro != WEFT_REPRO_DEFAULT)
    return static_cast<uint64_t>(config->repro - WEFT_REPRO_OFF);
  if (env.empty() || env == "off" || env == "0") return 0;
  if (env == "ordered") return 1;
  if (env == "exact") return 2;
  return kNotAMode;
}

Status Comm::agreeOnRepro(const std::vector<uint64_t>& requests) {
  static const SharedSetting kRepro{"reproducibility mode", "WEFT_REPRO", "off, ordered or exact",
                                    kNotAMode, requestName};
  WEFT_RETURN_IF_ERROR(agreeOnSetting(kRepro, cfg_.repro, reproRequest_, requests, rank_));
  repro_ = static_cast<Repro>(reproRequest_);
  return Status();
}

void Comm::noteReproRules() const {
  if (repro_ == Repro::Off || rank_ != 0) return;
  std::string passed;
  for (const AlgoRule& r : rules_.rules) {
    for (CollType t : {CollType::AllReduce, CollType::Reduce, CollType::ReduceScatter}) {
      if ((!r.anyColl && r.type != t) || !algoImplements(r.algo, t) ||
          algoFoldsInRankOrder(r.algo, t))
        continue;
      if (!passed.empty()) passed += ", ";
      passed += std::string(collName(t)) + ":" + algoName(r.algo);
    }
  }
  if (!passed.empty())
    WEFT_WARN(kTuning,
              "WEFT_REPRO=%s: the WEFT_ALGO rules %s name algorithms that do not fold in rank "
              "order; float SUM/AVG/PROD/MIN/MAX calls pass over them (shm, direct, fold or "
              "gather_fold run those), the other calls follow them",
              reproName(repro_), passed.c_str());
}

Repro Comm::reproFor(weft_datatype_t dt, weft_op_t op) const {
  if (repro_ == Repro::Off || !orderSensitive(dt, op)) return Repro::Off;
  const bool sums = op == WEFT_SUM || op == WEFT_AVG;
  return repro_ == Repro::Exact && sums ? Repro::Exact : Repro::Ordered;
}

}  // namespace weft
