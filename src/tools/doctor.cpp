// ds-cli doctor: looks at the host the way an operator tuning a server would -- what
// the CPU can execute and what the OS lets it use, how cores and memory are arranged,
// how the kernel hands out pages and clocks -- then measures the two rooflines and says
// which ds-server flags to use and what to change on the host.
// Every probe is optional: a file that does not exist (containers, other kernels) prints
// "unknown" and never fails the command. CPUID is read here directly, because doctor
// also wants to show what the kernel dispatcher deliberately ignores.
#include <cpuid.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tools/machine_limits.h"
#include "runtime/numa.h"
#include "tools/cli_args.h"
#include "tools/command.h"
#include "util/strings.h"

namespace ds::cli {
namespace {

// ---- small readers ------------------------------------------------------------------

// $DS_HOST_ROOT prefixes every /proc and /sys path (tests point it at an empty
// directory to prove that doctor copes with a host that has none of the files).
std::string host_path(const std::string& path) {
  const char* root = std::getenv("DS_HOST_ROOT");
  return root && *root ? std::string(root) + path : path;
}

std::string read_first_line(const std::string& path) {
  std::ifstream f(host_path(path));
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  return line;
}

// "always [madvise] never" -> "madvise"
std::string bracketed(const std::string& s) {
  const size_t a = s.find('['), b = s.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? s.substr(a + 1, b - a - 1) : s;
}

// A "Key: value" field of /proc/cpuinfo or /proc/meminfo; "" when absent.
std::string proc_field(const std::string& path, const std::string& key) {
  std::ifstream f(host_path(path));
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

std::string or_unknown(const std::string& s) {
  return s.empty() ? "unknown" : s;
}

// ---- instruction sets ---------------------------------------------------------------

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool os_ymm = false, os_zmm = false, os_amx = false;  // XCR0: the OS saves that state
  std::string amx_grant = "n/a";                        // arch_prctl(ARCH_REQ_XCOMP_PERM)
};

uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Linux >= 5.16 hands out AMX tile data state only to processes that ask for it.
std::string request_amx_permission() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return "granted";
  return std::string("refused (") + std::strerror(errno) + ")";
}

CpuFeatures detect_features() {
  CpuFeatures c;
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  c.fma = cx & (1u << 12);
  c.f16c = cx & (1u << 29);
  const bool osxsave = cx & (1u << 27);
  if (osxsave) {
    const uint64_t xcr0 = read_xcr0();
    c.os_ymm = (xcr0 & 0x6) == 0x6;
    c.os_zmm = (xcr0 & 0xe6) == 0xe6;
    c.os_amx = (xcr0 & 0x60000) == 0x60000;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
    c.avx2 = b & (1u << 5);
    c.avx512f = b & (1u << 16);
    c.avx512dq = b & (1u << 17);
    c.avx512bw = b & (1u << 30);
    c.avx512vl = b & (1u << 31);
    c.avx512vnni = cx & (1u << 11);
    c.amx_bf16 = d & (1u << 22);
    c.amx_tile = d & (1u << 24);
    c.amx_int8 = d & (1u << 25);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) {
    c.avx_vnni = a & (1u << 4);
    c.avx512bf16 = a & (1u << 5);
  }
  if (c.amx_tile && c.os_amx) c.amx_grant = request_amx_permission();
  return c;
}

const char* yn(bool v) {
  return v ? "yes" : "no";
}

void print_isa(const CpuFeatures& c) {
  std::printf("cpu: %s\n", or_unknown(proc_field("/proc/cpuinfo", "model name")).c_str());
  std::printf("instruction sets:\n");
  std::printf("  AVX2 %s  FMA %s  F16C %s  AVX-VNNI %s   (OS saves ymm state: %s)\n", yn(c.avx2), yn(c.fma), yn(c.f16c),
              yn(c.avx_vnni), yn(c.os_ymm));
  std::printf("  AVX-512 F %s  BW %s  VL %s  DQ %s  VNNI %s  BF16 %s   (OS saves zmm state: %s)\n", yn(c.avx512f),
              yn(c.avx512bw), yn(c.avx512vl), yn(c.avx512dq), yn(c.avx512vnni), yn(c.avx512bf16), yn(c.os_zmm));
  std::printf("  AMX TILE %s  INT8 %s  BF16 %s   (OS tile state in XCR0: %s; tile data permission: %s)\n",
              yn(c.amx_tile), yn(c.amx_int8), yn(c.amx_bf16), yn(c.os_amx), c.amx_grant.c_str());
  std::printf("  kernel path ds-server will use: %s (DS_ISA=ref|avx2|avx512|amx lowers it)\n", isa_name(best_isa()));
  if (best_isa() >= Isa::kAvx512 && !c.avx512bf16)
    std::printf("  BF16 weights: widened to float (no AVX512_BF16); every other type runs at full speed\n");
}

// ---- topology and host settings -----------------------------------------------------

struct HostSettings {
  std::string smt_control, thp, thp_defrag, governor, numa_balancing;
  std::string huge_total, huge_free, huge_size;
  std::string memlock;
};

// Distinct scaling governors over all CPUs ("performance", "powersave, performance").
std::string governors(int n_cpus) {
  std::set<std::string> seen;
  for (int i = 0; i < n_cpus; ++i) {
    const std::string g = read_first_line(str_format("/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", i));
    if (!g.empty()) seen.insert(g);
  }
  std::string out;
  for (const auto& g : seen) out += (out.empty() ? "" : ", ") + g;
  return out;
}

HostSettings read_host_settings() {
  HostSettings h;
  h.smt_control = read_first_line("/sys/devices/system/cpu/smt/control");
  h.thp = bracketed(read_first_line("/sys/kernel/mm/transparent_hugepage/enabled"));
  h.thp_defrag = bracketed(read_first_line("/sys/kernel/mm/transparent_hugepage/defrag"));
  h.governor = governors(static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)));
  h.numa_balancing = read_first_line("/proc/sys/kernel/numa_balancing");
  h.huge_total = proc_field("/proc/meminfo", "HugePages_Total");
  h.huge_free = proc_field("/proc/meminfo", "HugePages_Free");
  h.huge_size = proc_field("/proc/meminfo", "Hugepagesize");
  struct rlimit rl {};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    h.memlock = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : human_bytes(static_cast<double>(rl.rlim_cur));
  }
  return h;
}

void print_topology(const Topology& t, const HostSettings& h) {
  std::printf("topology (%s):\n", t.from_hwloc ? "hwloc" : "hwloc unavailable; counts from the C++ runtime");
  std::printf("  packages %d, physical cores %d, hardware threads %d, SMT %s (control: %s)\n", t.n_packages, t.n_cores,
              t.n_pus, t.smt() ? "on" : "off", or_unknown(h.smt_control).c_str());
  std::printf("  L3 total: %s\n", t.l3_bytes ? human_bytes(static_cast<double>(t.l3_bytes)).c_str() : "unknown");
  std::printf("  NUMA nodes: %zu\n", t.nodes.size());
  for (const NumaNode& n : t.nodes) {
    std::printf("    node %d: %d cores, %d hardware threads, memory %s\n", n.os_index, n.n_cores, n.n_pus,
                n.memory_bytes ? human_bytes(static_cast<double>(n.memory_bytes)).c_str() : "unknown");
  }
}

void print_host(const HostSettings& h) {
  std::printf("host:\n");
  std::printf("  transparent huge pages: %s (defrag: %s)\n", or_unknown(h.thp).c_str(),
              or_unknown(h.thp_defrag).c_str());
  std::printf("  reserved huge pages: %s total, %s free, page size %s\n", or_unknown(h.huge_total).c_str(),
              or_unknown(h.huge_free).c_str(), or_unknown(h.huge_size).c_str());
  std::printf("  CPU frequency governor: %s\n", or_unknown(h.governor).c_str());
  std::printf("  automatic NUMA balancing: %s\n", or_unknown(h.numa_balancing).c_str());
  std::printf("  locked-memory limit (for --mlock): %s\n", or_unknown(h.memlock).c_str());
}

// ---- recommendations ----------------------------------------------------------------

void print_recommendations(const Topology& t, const HostSettings& h, const CpuFeatures& c) {
  const bool multi_node = t.nodes.size() > 1;
  std::printf("recommended ds-server flags:\n");
  std::printf("  --threads %d   (one per physical core%s)\n", t.n_cores,
              t.smt() ? "; SMT siblings share the vector units and only add contention" : "");
  if (multi_node) {
    const int per_node = t.nodes.front().n_cores;
    std::printf("  --numa distribute   (one instance over all %zu nodes: weights and KV interleaved)\n",
                t.nodes.size());
    std::printf(
        "  or one instance per node: --numa isolate --threads %d, started under\n"
        "     `numactl --cpunodebind=N --membind=N` for N in 0..%zu\n",
        per_node, t.nodes.size() - 1);
  } else {
    std::printf("  --numa none   (a single NUMA node: nothing to bind)\n");
  }
  std::vector<std::string> todo;
  if (h.thp == "never") {
    todo.push_back(
        "enable transparent huge pages for the KV cache: "
        "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled");
  }
  if (!h.governor.empty() && h.governor != "performance") {
    todo.push_back("set the CPU frequency governor to performance (now " + h.governor +
                   "): cpupower frequency-set -g performance");
  }
  if (multi_node && h.numa_balancing == "1") {
    todo.push_back(
        "disable automatic NUMA balancing, which migrates pinned memory: "
        "echo 0 > /proc/sys/kernel/numa_balancing");
  }
  if (h.memlock != "unlimited") {
    todo.push_back(
        "for --mlock, raise the locked-memory limit above the model size (ulimit -l unlimited, "
        "or LimitMEMLOCK=infinity in the systemd unit)");
  }
  if (c.amx_tile && c.os_amx && c.amx_grant != "granted") {
    todo.push_back("AMX is present but the kernel refused tile state: use Linux 5.16 or newer");
  } else if (c.amx_tile && !c.os_amx) {
    todo.push_back("AMX is present but the OS does not enable tile state (XCR0): use Linux 5.16 or newer");
  }
  if (c.avx512f && !c.os_zmm) todo.push_back("the OS does not save AVX-512 state; AVX-512 kernels are unusable");
  std::printf("host changes:\n");
  if (todo.empty()) std::printf("  none needed\n");
  for (const auto& s : todo) std::printf("  - %s\n", s.c_str());
}

// The systemd configuration the recommendations imply, as files to drop in: the unit's
// command line, the huge-page and NUMA-balancing host settings as tmpfiles.d/sysctl.d entries
// (applied at every boot), and the per-node template for multi-node hosts.
void print_systemd(const Topology& t, const HostSettings& h) {
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string server = "/usr/bin/ds-server";
  if (n > 0) {
    std::string self(exe, static_cast<size_t>(n));
    server = self.substr(0, self.rfind('/') + 1) + "ds-server";
  }
  const bool multi_node = t.nodes.size() > 1;
  std::printf("systemd configuration for these recommendations:\n");
  std::printf("  # /etc/systemd/system/ds-server.service.d/host.conf, then: systemctl daemon-reload\n");
  std::printf("  [Service]\n");
  std::printf("  ExecStart=\n");
  std::printf("  ExecStart=%s --config /etc/ds-server/ds-server.json --threads %d --numa %s\n", server.c_str(),
              t.n_cores, multi_node ? "distribute" : "none");
  std::printf("  LimitMEMLOCK=infinity\n");
  if (h.thp == "never") {
    std::printf("  # /etc/tmpfiles.d/ds-server.conf: transparent huge pages for the KV cache at every boot\n");
    std::printf("  w /sys/kernel/mm/transparent_hugepage/enabled - - - - madvise\n");
  }
  if (multi_node && h.numa_balancing == "1") {
    std::printf("  # /etc/sysctl.d/90-ds-server.conf: no automatic NUMA balancing of pinned memory\n");
    std::printf("  kernel.numa_balancing = 0\n");
  }
  if (multi_node) {
    std::printf("  # or one instance per NUMA node (ds-server@N.service: node N's cores and memory, port 8100+N):\n");
    std::printf("  #   systemctl disable --now ds-server; systemctl enable --now");
    for (size_t i = 0; i < t.nodes.size(); ++i) std::printf(" ds-server@%zu", i);
    std::printf("\n");
  }
}

// ---- measurements -------------------------------------------------------------------

Status print_measurements(int n_threads, size_t bandwidth_bytes) {
  auto created = ThreadPool::create({.n_threads = n_threads});
  if (!created) return created.status();
  ThreadPool& pool = **created;
  std::printf("measured with %d thread%s:\n", pool.n_threads(), pool.n_threads() == 1 ? "" : "s");
  auto bw = measure_read_bandwidth(pool, {.bytes = bandwidth_bytes});
  if (bw) {
    std::printf("  read bandwidth: %.1f GB/s (median; %.1f-%.1f over repeats; %d streams per thread, %s buffer)\n",
                bw->gbs.median, bw->gbs.min, bw->gbs.max, bw->streams_per_thread,
                human_bytes(static_cast<double>(bw->bytes)).c_str());
  } else {
    std::printf("  read bandwidth: unknown (%s)\n", bw.message().c_str());
  }
  const Int8PeakResult peak = measure_int8_peak(pool);
  std::printf("  int8 dot-product peak: %.0f GOPS (median; %.0f-%.0f; %s)\n", peak.gops.median, peak.gops.min,
              peak.gops.max, peak.isa.c_str());
  const FlopsPeakResult fp32 = measure_fp32_peak(pool);
  std::printf("  float32 FMA peak: %.0f GFLOPS (median; %.0f-%.0f; %s; the limit of attention)\n", fp32.gflops.median,
              fp32.gflops.min, fp32.gflops.max, fp32.isa.c_str());
  const FlopsPeakResult bf16 = measure_bf16_peak(pool);
  if (bf16.gflops.median > 0) {
    std::printf(
        "  bf16 dot-product peak: %.0f GFLOPS (median; %.0f-%.0f; %s; the limit of attention over --kv-type bf16)\n",
        bf16.gflops.median, bf16.gflops.min, bf16.gflops.max, bf16.isa.c_str());
  } else {
    std::printf("  bf16 dot-product peak: none (no AVX512_BF16: --kv-type bf16 attention multiplies in float32)\n");
  }
  return Status::ok();
}

void print_usage() {
  std::printf(
      "usage: ds-cli doctor [--threads N] [--no-measure] [--bandwidth-mib M]\n"
      "  Reports instruction sets, NUMA layout, huge pages, frequency governor and SMT, measures\n"
      "  read bandwidth and int8 peak, and recommends ds-server flags and host changes, with the\n"
      "  systemd drop-in, tmpfiles.d and sysctl.d entries that apply them.\n"
      "  --threads N        threads for the measurements (default: one per physical core)\n"
      "  --no-measure       skip the measurements (a few seconds)\n"
      "  --bandwidth-mib M  bandwidth test buffer size (default: max(512 MiB, 8 x L3))\n");
}

Status cmd_doctor(const std::vector<std::string>& args) {
  int n_threads = 0;
  bool measure = true;
  size_t bandwidth_bytes = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--help" || a == "-h") {
      print_usage();
      return Status::ok();
    } else if (a == "--no-measure") {
      measure = false;
    } else if ((a == "--threads" || a == "-t") && has_value) {
      DS_RETURN_IF_ERROR(parse_int_arg(a, args[++i], 0, kMaxCliThreads, &n_threads));
    } else if (a == "--bandwidth-mib" && has_value) {
      int64_t mib = 0;
      DS_RETURN_IF_ERROR(parse_int_arg(a, args[++i], 1, int64_t{1} << 20, &mib));
      bandwidth_bytes = static_cast<size_t>(mib) << 20;
    } else {
      return Status::invalid_argument("unknown or incomplete option '" + a + "'");
    }
  }
  const CpuFeatures cpu = detect_features();
  const HostSettings host = read_host_settings();
  const Topology& topo = topology();
  print_isa(cpu);
  print_topology(topo, host);
  print_host(host);
  if (measure) DS_RETURN_IF_ERROR(print_measurements(n_threads, bandwidth_bytes));
  print_recommendations(topo, host, cpu);
  print_systemd(topo, host);
  return Status::ok();
}

}  // namespace

DS_CLI_COMMAND(doctor, "inspect this host (ISA, NUMA, huge pages), measure its limits, recommend flags", cmd_doctor);

}  // namespace ds::cli
