// SPDX-License-Identifier: MIT
#include "reference_tools.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <hmemreg/error.hpp>
#include <nlohmann/json.hpp>

extern char **environ;

namespace hmemreg::bench {

std::string capture(const std::string &cmd)
{
	std::string out;
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		return out;
	char b[4096];
	size_t n;
	while ((n = fread(b, 1, sizeof(b), p)) > 0)
		out.append(b, n);
	pclose(p);
	return out;
}

double iperf3_client_gbps(const std::string &host, int port, double seconds, size_t write_len)
{
	char cmd[512];
	std::snprintf(cmd, sizeof(cmd), "iperf3 -J -c '%s' -p %d -t %.1f -l %zu 2>/dev/null", host.c_str(), port,
		      seconds, write_len);
	const auto report = nlohmann::json::parse(capture(cmd), nullptr, false);
	if (report.is_discarded() || report.contains("error"))
		return 0;
	// The receiver's side of the whole run (TCP: sum_received).
	const auto bps = report.value(nlohmann::json::json_pointer("/end/sum_received/bits_per_second"), 0.0);
	return bps > 0 ? bps / 1e9 : 0;
}


pid_t spawn_quiet(std::vector<std::string> args)
{
	posix_spawn_file_actions_t fa;
	if (int e = posix_spawn_file_actions_init(&fa))
		throw Error(HMEMREG_ESYS, std::string("xfer: posix_spawn: ") + std::strerror(e));
	std::unique_ptr<posix_spawn_file_actions_t, int (*)(posix_spawn_file_actions_t *)> hold(
		&fa, posix_spawn_file_actions_destroy);
	int e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (e)
		throw Error(HMEMREG_ESYS, std::string("xfer: posix_spawn: ") + std::strerror(e));
	std::vector<char *> argv;
	for (std::string &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	pid_t pid;
	if ((e = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ)))
		throw Error(HMEMREG_ESYS, "xfer: cannot start " + args[0] + ": " + std::strerror(e));
	return pid;
}

void Spawned::start(std::vector<std::string> argv)
{
	pids_.push_back(spawn_quiet(std::move(argv)));
}

void Spawned::stop() noexcept
{
	for (pid_t pid : pids_) {
		::kill(pid, SIGTERM); // a server that got no client would wait forever
		int st;
		while (::waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	pids_.clear();
}

void start_iperf3_servers(Spawned &s, int port0, unsigned streams, const std::string &bind)
{
	for (unsigned i = 0; i < streams; i++) {
		std::vector<std::string> args{"iperf3", "-s", "-1", "-p", std::to_string(port0 + static_cast<int>(i))};
		if (!bind.empty())
			args.insert(args.end(), {"-B", bind});
		s.start(std::move(args));
	}
}

} // namespace hmemreg::bench
