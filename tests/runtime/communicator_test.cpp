// The collectives of the in-process backend, each against its definition.
#include <gtest/gtest.h>

#include <numeric>

#include "pcgx/runtime/in_process.h"

namespace pcgx::runtime {
namespace {

constexpr int kDevices = 4;
const std::vector<int> kGroup{0, 2, 3};  // a proper subgroup: device 1 sits out

std::vector<float> own(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(rank * 100 + static_cast<int>(i));
  return v;
}

bool in_group(int r) { return std::find(kGroup.begin(), kGroup.end(), r) != kGroup.end(); }

TEST(InProcess, AllReduceReduceBroadcast) {
  InProcessWorld w(kDevices);
  std::vector<std::vector<float>> ar(kDevices), red(kDevices), bc(kDevices);
  w.run([&](Communicator& c) {
    const int r = c.rank();
    if (!in_group(r)) return;
    ar[r] = own(r, 5), red[r] = own(r, 5), bc[r] = own(r, 5);
    c.all_reduce(kGroup, ar[r]);
    c.reduce(kGroup, 2, red[r]);
    c.broadcast(kGroup, 3, bc[r]);
  });
  for (int r : kGroup) {
    for (size_t i = 0; i < 5; ++i) {
      float sum = 0;
      for (int m : kGroup) sum += own(m, 5)[i];
      EXPECT_EQ(ar[r][i], sum);
      EXPECT_EQ(red[r][i], r == 2 ? sum : own(r, 5)[i]);
      EXPECT_EQ(bc[r][i], own(3, 5)[i]);
    }
  }
}

// Every all-reduce form (ring on 2 members or from kRingBytes, reduce then
// broadcast otherwise), sizes not divisible by the group, a buffer smaller
// than the group: the sum on every member, 2(k-1) x size bytes sent.
TEST(InProcess, AllReduceRingAndRootedSendTheSameSum) {
  const size_t ring = static_cast<size_t>(Communicator::kRingBytes / 4);
  for (const std::vector<int>& group : {std::vector<int>{1, 3}, kGroup, std::vector<int>{3, 0, 2, 1}})
    for (const size_t n : {size_t{1}, size_t{7}, ring - 1, ring + 5}) {
      InProcessWorld w(kDevices);
      std::vector<std::vector<float>> got(kDevices);
      w.run([&](Communicator& c) {
        const int r = c.rank();
        if (std::find(group.begin(), group.end(), r) == group.end()) return;
        got[r] = own(r, n);
        c.all_reduce(group, got[r], Communicator::kCollectiveTagBase - 10);
      });
      const auto k = static_cast<int64_t>(group.size());
      EXPECT_EQ(w.bytes_sent(), 2 * (k - 1) * static_cast<int64_t>(n) * 4) << k << " members, " << n << " floats";
      for (int r : group)
        for (size_t i = 0; i < n; i += 1 + n / 17) {
          float sum = 0;
          for (int m : group) sum += own(m, n)[i];
          ASSERT_EQ(got[r][i], sum) << k << " members, " << n << " floats, element " << i;
        }
    }
}

TEST(InProcess, GatherScatterAllToAll) {
  InProcessWorld w(kDevices);
  const size_t k = kGroup.size(), n = 2;
  std::vector<std::vector<float>> ag(kDevices), rs(kDevices), a2a(kDevices);
  w.run([&](Communicator& c) {
    const int r = c.rank();
    if (!in_group(r)) return;
    ag[r].resize(k * n), rs[r].resize(n), a2a[r].resize(k * n);
    c.all_gather(kGroup, own(r, n), ag[r]);
    c.reduce_scatter(kGroup, own(r, k * n), rs[r]);
    c.all_to_all(kGroup, own(r, k * n), a2a[r]);
  });
  for (size_t me = 0; me < k; ++me) {
    const int r = kGroup[me];
    for (size_t i = 0; i < k; ++i)
      for (size_t e = 0; e < n; ++e) {
        EXPECT_EQ(ag[r][i * n + e], own(kGroup[i], n)[e]);
        EXPECT_EQ(a2a[r][i * n + e], own(kGroup[i], k * n)[me * n + e]);
      }
    for (size_t e = 0; e < n; ++e) {
      float sum = 0;
      for (int m : kGroup) sum += own(m, k * n)[me * n + e];
      EXPECT_EQ(rs[r][e], sum);
    }
  }
}

TEST(InProcess, MessagesWithOneKeyArriveInOrderAndFailuresPropagate) {
  InProcessWorld w(2);
  std::vector<float> got(3);
  w.run([&](Communicator& c) {
    if (c.rank() == 0) {
      for (float v : {1.f, 2.f, 3.f}) c.send(1, 7, std::vector<float>{v});
    } else {
      for (float& g : got) c.recv(0, 7, std::span<float>(&g, 1));
    }
  });
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3}));
  // A device that throws releases one blocked in recv, and the error surfaces.
  InProcessWorld w2(2);
  EXPECT_THROW(w2.run([](Communicator& c) {
    std::vector<float> x(1);
    if (c.rank() == 0) throw std::invalid_argument("boom");
    c.recv(0, 1, x);
  }),
               std::invalid_argument);
}

}  // namespace
}  // namespace pcgx::runtime
