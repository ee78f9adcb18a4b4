// weft_timeline_span: a framework's own spans on the communicator's
// timeline (WEFT_TIMELINE), e.g. weft.torch's per-tensor phases, so that one
// file shows what the framework did beside the collectives it ran.
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/api_state.h"
#include "core/log.h"

using namespace weft;

extern "C" weft_result_t weft_timeline_span(weft_comm_t comm, const char* track, const char* name,
                                            uint64_t begin_ns, uint64_t end_ns, int nargs,
                                            const char* const* keys, const char* const* values) {
  Status st;
  std::shared_ptr<Comm> c = lookupComm(comm, &st);
  if (!c) return setError(static_cast<Comm*>(nullptr), st);
  if (!track || !*track || !name || !*name)
    return setError(c.get(), invalidArgument("track and name must be non-empty strings"));
  if (end_ns < begin_ns)
    return setError(c.get(), invalidArgument(strFormat(
                                 "end_ns %llu is before begin_ns %llu",
                                 static_cast<unsigned long long>(end_ns),
                                 static_cast<unsigned long long>(begin_ns))));
  if (nargs < 0 || nargs > 64 || (nargs > 0 && (!keys || !values)))
    return setError(c.get(), invalidArgument(strFormat(
                                 "nargs %d: 0 to 64 arguments, with keys and values", nargs)));
  std::vector<std::pair<std::string, std::string>> args;
  for (int i = 0; i < nargs; ++i) {
    if (!keys[i] || !values[i])
      return setError(c.get(), invalidArgument(strFormat("argument %d: key or value is NULL", i)));
    args.emplace_back(keys[i], values[i]);
  }
  std::lock_guard<Mutex> lk(c->mu);
  c->timelineSpan(track, name, begin_ns, end_ns, args);
  return WEFT_SUCCESS;
}
