// `ds-cli doctor` runs on this host, exits 0 and prints every section it promises,
// including the measured limits and flag recommendations that match the topology.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "runtime/numa.h"
#include "test_util.h"

namespace ds {
namespace {

test::CommandResult run_cli(const std::string& args, const std::string& env = "") {
  return test::run_command(env + (env.empty() ? "" : " ") + test::cli_path() + " " + args + " 2>&1");
}

TEST(Doctor, RunsAndReportsEverySection) {
  const test::CommandResult r = run_cli("doctor --bandwidth-mib 64");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* needle :
       {"instruction sets:", "AVX2 yes", "AVX-512 F", "AMX TILE", "NUMA nodes:", "physical cores",
        "transparent huge pages:", "reserved huge pages:", "CPU frequency governor:", "SMT", "read bandwidth:", "GB/s",
        "int8 dot-product peak:", "GOPS", "recommended ds-server flags:", "host changes:"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << r.out;
  }
  const Topology& t = topology();
  EXPECT_NE(r.out.find("--threads " + std::to_string(t.n_cores) + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(t.nodes.size() > 1 ? "--numa distribute" : "--numa none"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("unknown ("), std::string::npos) << "a measurement failed:\n" << r.out;
}

TEST(Doctor, HostWithoutProcOrSysFilesSaysUnknown) {
  const std::string empty_root = test::make_temp_dir("doctor_root");
  const test::CommandResult r = run_cli("doctor --no-measure", "DS_HOST_ROOT=" + empty_root);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* needle :
       {"cpu: unknown", "transparent huge pages: unknown (defrag: unknown)",
        "reserved huge pages: unknown total, unknown free, page size unknown", "CPU frequency governor: unknown",
        "automatic NUMA balancing: unknown", "(control: unknown)", "recommended ds-server flags:"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << r.out;
  }
}

TEST(Doctor, NoMeasureAndBadOption) {
  const test::CommandResult quick = run_cli("doctor --no-measure");
  ASSERT_EQ(quick.exit_code, 0) << quick.out;
  EXPECT_EQ(quick.out.find("read bandwidth:"), std::string::npos);
  EXPECT_NE(quick.out.find("recommended ds-server flags:"), std::string::npos);
  const test::CommandResult bad = run_cli("doctor --frobnicate");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--frobnicate"), std::string::npos) << bad.out;
}

// The drop-in names the ds-server next to ds-cli and the flags recommended above it; a host
// with THP off gets the tmpfiles.d line that turns it on at boot.
TEST(Doctor, PrintsTheSystemdConfigurationOfItsRecommendations) {
  const test::CommandResult r = run_cli("doctor --no-measure");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string cli = test::cli_path();
  const std::string server = cli.substr(0, cli.rfind('/') + 1) + "ds-server";
  const Topology& t = topology();
  for (const std::string& needle :
       {std::string("systemd configuration for these recommendations:"), std::string("  [Service]\n  ExecStart=\n"),
        "  ExecStart=" + server + " --config /etc/ds-server/ds-server.json --threads " + std::to_string(t.n_cores) +
            " --numa " + (t.nodes.size() > 1 ? "distribute" : "none") + "\n",
        std::string("  LimitMEMLOCK=infinity\n")}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << r.out;
  }

  const std::string root = test::make_temp_dir("doctor_thp");
  ASSERT_EQ(
      std::system(("mkdir -p " + root + "/sys/kernel/mm/transparent_hugepage && echo 'always madvise [never]' > " +
                   root + "/sys/kernel/mm/transparent_hugepage/enabled")
                      .c_str()),
      0);
  const test::CommandResult off = run_cli("doctor --no-measure", "DS_HOST_ROOT=" + root);
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_NE(off.out.find("  w /sys/kernel/mm/transparent_hugepage/enabled - - - - madvise\n"), std::string::npos)
      << off.out;
  EXPECT_EQ(r.out.find("transparent_hugepage/enabled - - - -"), std::string::npos) << "THP is on here:\n" << r.out;
}

}  // namespace
}  // namespace ds
