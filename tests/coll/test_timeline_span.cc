// weft_timeline_span: a framework's spans land in the communicator's
// timeline file on tracks of their own, valid JSON beside the
// collectives; bad arguments are refused; nothing is written with the
// timeline off.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <string>

#include "coll/harness.h"

using namespace wtest;

namespace {

uint64_t monoNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

TEST_CASE("timeline span: framework spans on their own tracks beside the ops", "[telemetry]") {
  const std::string path = "/tmp/weft-span-" + std::to_string(getpid()) + ".json";
  ScopedEnv tl("WEFT_TIMELINE", path.c_str());
  weft_comm_t c = nullptr;
  REQUIRE(weft_comm_init_all(&c, 1) == WEFT_SUCCESS);
  float x = 1;
  REQUIRE(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, c, nullptr) == WEFT_SUCCESS);
  const uint64_t t0 = monoNs();
  const char* keys[] = {"bucket", "note", "bytes"};
  const char* values[] = {"3", "say \"hi\"\n", "4096"};
  CHECK(weft_timeline_span(c, "tensor: fc.weight", "QUEUE", t0, t0 + 5000, 3, keys, values) ==
        WEFT_SUCCESS);
  CHECK(weft_timeline_span(c, "tensor: fc.weight", "ALLREDUCE", t0 + 5000, t0 + 9000, 0, nullptr,
                           nullptr) == WEFT_SUCCESS);
  CHECK(weft_timeline_span(c, "tensor: fc.bias", std::string(100, 'n').c_str(), t0, t0, 0,
                           nullptr, nullptr) == WEFT_SUCCESS);
  // Refused, nothing written.
  CHECK(weft_timeline_span(c, "", "X", t0, t0, 0, nullptr, nullptr) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(weft_timeline_span(c, "t", nullptr, t0, t0, 0, nullptr, nullptr) ==
        WEFT_ERR_INVALID_ARGUMENT);
  CHECK(weft_timeline_span(c, "t", "X", t0 + 1, t0, 0, nullptr, nullptr) ==
        WEFT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(weft_get_last_error(c)).find("before begin_ns") != std::string::npos);
  CHECK(weft_timeline_span(c, "t", "X", t0, t0, 2, keys, nullptr) == WEFT_ERR_INVALID_ARGUMENT);
  CHECK(weft_timeline_span(nullptr, "t", "X", t0, t0, 0, nullptr, nullptr) ==
        WEFT_ERR_INVALID_ARGUMENT);
  REQUIRE(weft_comm_destroy(c) == WEFT_SUCCESS);

  const std::string j = catFiles(path);
  INFO(j);
  CHECK(j.find("\"thread_name\"") != std::string::npos);
  CHECK(j.find("\"name\":\"tensor: fc.weight\"") != std::string::npos);
  CHECK(j.find("\"name\":\"tensor: fc.bias\"") != std::string::npos);
  CHECK(j.find("\"name\":\"QUEUE\"") != std::string::npos);
  CHECK(j.find("\"dur\":5.000") != std::string::npos);
  CHECK(j.find("\"bucket\":3") != std::string::npos);
  CHECK(j.find("\"bytes\":4096") != std::string::npos);
  CHECK(j.find("\"note\":\"say \\\"hi\\\"\\u000a\"") != std::string::npos);
  CHECK(j.find(std::string(60, 'n')) != std::string::npos);
  CHECK(j.find(std::string(61, 'n')) == std::string::npos);
  CHECK(j.find("\"name\":\"X\"") == std::string::npos);
  CHECK(j.find("allreduce") != std::string::npos);
  CHECK(j.substr(j.size() - 4) == "\n]}\n");
  unlink(path.c_str());
}

TEST_CASE("timeline span: nothing happens with the timeline off", "[telemetry]") {
  weft_comm_t c = nullptr;
  REQUIRE(weft_comm_init_all(&c, 1) == WEFT_SUCCESS);
  CHECK(weft_timeline_span(c, "t", "X", 1, 2, 0, nullptr, nullptr) == WEFT_SUCCESS);
  REQUIRE(weft_comm_destroy(c) == WEFT_SUCCESS);
}

TEST_CASE("timeline span: two communicators of one rank share its file - each on its own track",
          "[telemetry]") {
  // Before: the second truncated the first's file, and their writes
  // overwrote each other (a framework's second group of the same ranks).
  const std::string path = "/tmp/weft-span2-" + std::to_string(getpid()) + ".json";
  ScopedEnv tl("WEFT_TIMELINE", path.c_str());
  weft_comm_t a = nullptr, b = nullptr;
  REQUIRE(weft_comm_init_all(&a, 1) == WEFT_SUCCESS);
  REQUIRE(weft_comm_init_all(&b, 1) == WEFT_SUCCESS);
  float x = 1;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, a, nullptr) == WEFT_SUCCESS);
    REQUIRE(weft_broadcast(&x, &x, 1, WEFT_FLOAT32, 0, b, nullptr) == WEFT_SUCCESS);
  }
  REQUIRE(weft_comm_destroy(a) == WEFT_SUCCESS);
  REQUIRE(weft_broadcast(&x, &x, 1, WEFT_FLOAT32, 0, b, nullptr) == WEFT_SUCCESS);
  REQUIRE(weft_comm_destroy(b) == WEFT_SUCCESS);
  const std::string j = catFiles(path);
  INFO(j);
  size_t tracks = 0, allreduces = 0, broadcasts = 0;
  for (size_t at = 0; (at = j.find("(rank 0 of 1)", at)) != std::string::npos; ++at) ++tracks;
  for (size_t at = 0; (at = j.find("\"name\":\"allreduce #", at)) != std::string::npos; ++at)
    ++allreduces;
  for (size_t at = 0; (at = j.find("\"name\":\"broadcast #", at)) != std::string::npos; ++at)
    ++broadcasts;
  CHECK(tracks == 2);
  CHECK(allreduces == 3);
  CHECK(broadcasts == 4);
  CHECK(j.find("\"process_name\"") == j.rfind("\"process_name\""));  // one header
  CHECK(j.substr(j.size() - 4) == "\n]}\n");
  unlink(path.c_str());
}

TEST_CASE("stats file: a second communicator of one rank writes a file of its own",
          "[telemetry]") {
  // Before: both wrote the rank's WEFT_STATS path, the last destroyed
  // winning (weft.torch's check group hid the training's figures).
  const std::string dir = "/tmp/weft-stats2-" + std::to_string(getpid());
  removeTree(dir);
  REQUIRE(system(("mkdir -p " + dir).c_str()) == 0);
  ScopedEnv st("WEFT_STATS", (dir + "/s%r.json").c_str());
  weft_comm_t a = nullptr, b = nullptr;
  REQUIRE(weft_comm_init_all(&a, 1) == WEFT_SUCCESS);
  REQUIRE(weft_comm_init_all(&b, 1) == WEFT_SUCCESS);
  float x = 1;
  for (int i = 0; i < 5; ++i)
    REQUIRE(weft_allreduce(&x, &x, 1, WEFT_FLOAT32, WEFT_SUM, a, nullptr) == WEFT_SUCCESS);
  REQUIRE(weft_barrier(b, nullptr) == WEFT_SUCCESS);
  REQUIRE(weft_comm_destroy(a) == WEFT_SUCCESS);
  REQUIRE(weft_comm_destroy(b) == WEFT_SUCCESS);
  const std::string all = catFiles(dir + "/s0*.json");
  INFO(all);
  size_t files = 0;
  for (size_t at = 0; (at = all.find("\"comm\":", at)) != std::string::npos; ++at) ++files;
  CHECK(files == 2);
  CHECK(catFiles(dir + "/s0.json").find("allreduce") != std::string::npos);
  CHECK(catFiles(dir + "/s0.comm*.json").find("barrier") != std::string::npos);
  removeTree(dir);
}
