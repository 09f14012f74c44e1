// SPDX-License-Identifier: MIT
// Runs fabric_peer in a child process (optionally inside a network namespace)
// and talks to it over pipes.
#pragma once

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"

namespace fx {

inline std::vector<uint8_t> unhex(const std::string &s)
{
	std::vector<uint8_t> v;
	for (size_t i = 0; i + 1 < s.size(); i += 2)
		v.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
	return v;
}

inline uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

class PeerProcess {
public:
	// argv: the full command (e.g. {"ip","netns","exec","ns","fabric_peer",...}).
	explicit PeerProcess(std::vector<std::string> argv, std::vector<std::string> env = {})
	{
		int in[2], out[2];
		cr_assert(pipe(in) == 0 && pipe(out) == 0);
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
		posix_spawn_file_actions_addclose(&fa, in[1]);
		posix_spawn_file_actions_addclose(&fa, out[0]);
		std::vector<char *> args;
		for (auto &a : argv)
			args.push_back(a.data());
		args.push_back(nullptr);
		std::vector<char *> envp;
		for (char **e = environ; *e; e++)
			envp.push_back(*e);
		for (auto &e : env)
			envp.push_back(e.data());
		envp.push_back(nullptr);
		int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
		posix_spawn_file_actions_destroy(&fa);
		cr_assert_eq(rc, 0, "cannot start %s", args[0]);
		close(in[0]);
		close(out[1]);
		to_ = fdopen(in[1], "w");
		from_ = fdopen(out[0], "r");
		std::string l = line();
		cr_assert(l.rfind("ADDR ", 0) == 0, "peer said '%s'", l.c_str());
		address = unhex(l.substr(5));
		l = line();
		cr_assert(l.rfind("DESC ", 0) == 0, "peer said '%s'", l.c_str());
		descriptor = unhex(l.substr(5));
	}
	~PeerProcess()
	{
		if (pid_ > 0) {
			std::fputs("QUIT\n", to_);
			std::fflush(to_);
			wait_exit();
		}
		std::fclose(to_);
		std::fclose(from_);
	}
	// Next line of output ("" at end of file).
	std::string line()
	{
		char b[512];
		if (!std::fgets(b, sizeof(b), from_))
			return "";
		std::string s(b);
		if (!s.empty() && s.back() == '\n')
			s.pop_back();
		return s;
	}
	void send(const std::string &line)
	{
		std::fputs((line + "\n").c_str(), to_);
		std::fflush(to_);
	}
	// fabric_peer with FABRIC_PEER_CALLER_PROGRESS=1: exits between two
	// progress calls (a crash outside any provider lock).
	void die()
	{
		send("DIE");
		wait_exit();
	}
	// Frozen (SIGSTOP): its connections stay open with whatever it was
	// sending half sent, as a partition leaves them. kill9() ends it.
	void stop() { ::kill(pid_, SIGSTOP); }
	void kill9()
	{
		::kill(pid_, SIGKILL);
		wait_exit();
	}
	int wait_exit()
	{
		int st = 0;
		waitpid(pid_, &st, 0);
		pid_ = -1;
		return st;
	}

	std::vector<uint8_t> address, descriptor;

private:
	pid_t pid_ = -1;
	FILE *to_ = nullptr;
	FILE *from_ = nullptr;
};

} // namespace fx
