// Two complementary binary trees over n ranks (NCCL's double binary tree).
//
// Tree 0 is the in-order binary tree over the labels 1..n with label = rank+1:
// a label x whose lowest set bit is b has children x - b/2 and x + b/2, its
// subtree spans the labels (x - b, x + b), and the root is the largest power
// of two <= n. Labels above n are left out: where x + b/2 > n, the right
// child is the first of x + b/4, x + b/8, ..., x + 1 that is <= n (the only
// labels of that subtree that exist). Odd labels (b = 1) are the leaves and
// even labels always have a left child, so in tree 0 the even ranks are the
// leaves and the odd ranks are interior.
//
// Tree 1 is tree 0 with every rank moved one place on: rank r sits where
// rank r-1 sits in tree 0, so its interior ranks are the even ones (rank 0
// is label n when n is even). Each rank is therefore interior in at most one
// tree and a leaf in the other, which is what lets the two trees run at
// once on the same links: the interior work (receive from two children,
// send to two children) of a rank belongs to one tree only.
//
// Depth: floor(log2 n) + 1 levels at most in each tree.
#pragma once

#include "algo/schedule.h"

namespace weft {

struct TreeLinks {
  int parent = -1;            // -1 at the root
  int child[2] = {-1, -1};    // -1 where absent; child[0] is filled first
  int nchildren() const { return (child[0] >= 0) + (child[1] >= 0); }
};

namespace tree_detail {

inline int lowBit(int x) { return x & -x; }

// The parent of label x in the tree over all positive labels.
inline int fullParent(int x) {
  const int b = lowBit(x);
  return ((x / b) & 3) == 1 ? x + b : x - b;
}

inline int labelOf(int n, int tree, int rank) { return tree == 0 ? rank + 1 : mod(rank - 1, n) + 1; }
inline int rankOf(int n, int tree, int label) { return tree == 0 ? label - 1 : label % n; }

}  // namespace tree_detail

// Parent and children of `rank` in tree `tree` (0 or 1) over `nranks` ranks.
inline TreeLinks binaryTreeLinks(int nranks, int tree, int rank) {
  using namespace tree_detail;
  const int n = nranks, x = labelOf(n, tree, rank), b = lowBit(x);
  TreeLinks t;
  int root = 1;
  while (2 * root <= n) root *= 2;
  if (x != root) {
    // The nearest ancestor that exists: the labels skipped lie in (n, 2*root).
    int p = fullParent(x);
    while (p > n) p = fullParent(p);
    t.parent = rankOf(n, tree, p);
  }
  if (b > 1) {
    t.child[0] = rankOf(n, tree, x - b / 2);
    for (int h = b / 2; h >= 1; h /= 2)
      if (x + h <= n) {
        t.child[1] = rankOf(n, tree, x + h);
        break;
      }
  }
  return t;
}

// The root of tree `tree`: the rank whose label is the largest power of two
// not above n.
inline int binaryTreeRoot(int nranks, int tree) {
  int x = 1;
  while (2 * x <= nranks) x *= 2;
  return tree_detail::rankOf(nranks, tree, x);
}

// An upper bound on the levels of either tree (1 for a single rank): a label
// with lowest bit b sits log2(root/b) levels below the root in the full tree,
// and leaving labels out only shortens paths.
inline int binaryTreeDepth(int nranks) {
  int levels = 1;
  for (int x = 1; 2 * x <= nranks; x *= 2) ++levels;
  return levels;
}

}  // namespace weft
