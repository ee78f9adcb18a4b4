// transports/base/fault_plan.h: WEFT_TEST_FAULTS's grammar and when a
// fault fires (the soak, tests/soak, runs the faults in the transports).
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "transports/base/fault_plan.h"

using namespace weft;

TEST_CASE("fault spec: good specs parse and print back the same", "[fault]") {
  for (const char* spec : {"delay:20@3", "short%0.5", "drop@1", "corrupt@17",
                           "delay:0%1,drop@2,corrupt%0.25"}) {
    std::vector<FaultRule> rules;
    INFO(spec);
    REQUIRE(parseFaultSpec(spec, &rules).isOk());
    std::vector<FaultRule> again;
    REQUIRE(parseFaultSpec(formatFaultSpec(rules), &again).isOk());
    REQUIRE(again.size() == rules.size());
    for (size_t i = 0; i < rules.size(); ++i) {
      CHECK(again[i].kind == rules[i].kind);
      CHECK(again[i].ms == rules[i].ms);
      CHECK(again[i].at == rules[i].at);
      CHECK(again[i].prob == rules[i].prob);
    }
  }
  std::vector<FaultRule> r;
  REQUIRE(parseFaultSpec("delay:250@4", &r).isOk());
  REQUIRE(r.size() == 1);
  CHECK(r[0].kind == FaultKind::Delay);
  CHECK(r[0].ms == 250);
  CHECK(r[0].at == 4);
}

TEST_CASE("fault spec: bad specs are refused saying why and change nothing", "[fault]") {
  const std::vector<FaultRule> before{FaultRule{FaultKind::Drop, 0, 9, 0}};
  for (const char* spec : {"", "drop", "drop@0", "drop@x", "drop@-1", "delay@3", "drop:5@1",
                           "delay:x@1", "delay:700000@1", "short%0", "short%1.5", "short%",
                           "short%-0.5", "flood@1", "drop@1,", ",drop@1", "corrupt@1%0.5"}) {
    std::vector<FaultRule> rules = before;
    INFO(spec);
    Status st = parseFaultSpec(spec, &rules);
    CHECK(st.code() == WEFT_ERR_INVALID_ARGUMENT);
    CHECK(st.message().find("WEFT_TEST_FAULTS") != std::string::npos);
    CHECK(rules.size() == 1);
    CHECK(rules[0].at == 9);
  }
}

TEST_CASE("fault plan: @N fires once at the N-th event of its kind only", "[fault]") {
  std::shared_ptr<FaultPlan> p;
  REQUIRE(FaultPlan::make("drop@3,delay:5@1", 1, 0, &p).isOk());
  REQUIRE(p);
  CHECK(p->delayMs() == 5);
  std::vector<int> fired;
  for (int i = 1; i <= 10; ++i) {
    CHECK_FALSE(p->fire(FaultKind::Corrupt, "test"));  // no rule: never
    if (p->fire(FaultKind::Drop, "test")) fired.push_back(i);
  }
  CHECK(fired == std::vector<int>{3});
  CHECK(p->fired(FaultKind::Drop) == 1);
  CHECK(p->fire(FaultKind::Delay, "test"));
  CHECK_FALSE(p->fire(FaultKind::Delay, "test"));
  std::shared_ptr<FaultPlan> none;
  REQUIRE(FaultPlan::make("", 1, 0, &none).isOk());
  CHECK_FALSE(none);
}

TEST_CASE("fault plan: %P fires at about P of the events, the same for the same seed", "[fault]") {
  auto count = [](uint64_t seed, int rank) {
    std::shared_ptr<FaultPlan> p;
    REQUIRE(FaultPlan::make("short%0.25", seed, rank, &p).isOk());
    int n = 0;
    for (int i = 0; i < 4000; ++i) n += p->fire(FaultKind::Short, "test");
    return n;
  };
  const int a = count(7, 0);
  CHECK(a > 800);
  CHECK(a < 1200);
  CHECK(count(7, 0) == a);
  std::shared_ptr<FaultPlan> all;
  REQUIRE(FaultPlan::make("short%1", 1, 0, &all).isOk());
  for (int i = 0; i < 100; ++i) REQUIRE(all->fire(FaultKind::Short, "test"));
}

TEST_CASE("fault plan: flipBit flips exactly one bit of the field", "[fault]") {
  for (uint64_t bit = 0; bit < 200; ++bit) {
    uint64_t v = 0x0123456789abcdefull;
    flipBit(&v, sizeof v, bit);
    CHECK(__builtin_popcountll(v ^ 0x0123456789abcdefull) == 1);
  }
}
