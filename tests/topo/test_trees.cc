// Double binary trees across nodes (algo/binary_tree.h through View), for
// every node count 1..256: two spanning trees, each node interior in at
// most one, depth within floor(log2 n) + 1.
#include "topo/view.h"
#include "topo_util.h"

using namespace weft;
using namespace weft::topo;

TEST_CASE("double binary trees across 1..256 nodes", "[topo]") {
  const System s = ttest::load("dgx-h100.xml");
  for (int n = 1; n <= 256; ++n) {
    INFO("nodes " << n);
    View v;
    REQUIRE(View::build(s, n, 8, &v).isOk());
    std::vector<int> interior(n, 0);
    for (int t = 0; t < 2; ++t) {
      int roots = 0, edges = 0;
      for (int x = 0; x < n; ++x) {
        const TreeLinks l = v.nodeTree(t, x);
        if (l.parent < 0) {
          ++roots;
          REQUIRE(x == binaryTreeRoot(n, t));
        } else {
          ++edges;
          // The parent lists x as a child.
          const TreeLinks p = v.nodeTree(t, l.parent);
          REQUIRE((p.child[0] == x || p.child[1] == x));
        }
        for (int c = 0; c < l.nchildren(); ++c) {
          REQUIRE(l.child[c] >= 0);
          REQUIRE(l.child[c] < n);
          REQUIRE(v.nodeTree(t, l.child[c]).parent == x);
        }
        if (l.nchildren() > 0) ++interior[x];
        // Every node reaches the root within the depth bound: no cycle.
        int y = x, depth = 1;
        while (v.nodeTree(t, y).parent >= 0) {
          y = v.nodeTree(t, y).parent;
          ++depth;
          REQUIRE(depth <= binaryTreeDepth(n));
        }
        REQUIRE(y == binaryTreeRoot(n, t));
      }
      REQUIRE(roots == 1);
      REQUIRE(edges == n - 1);
    }
    for (int x = 0; x < n; ++x) REQUIRE(interior[x] <= 1);
    // A tree enters each node at the head of a channel's chain.
    for (int t = 0; t < 2; ++t)
      REQUIRE(v.treeHead(t) == v.channels[t % v.channels.size()].chain.front());
  }
}
