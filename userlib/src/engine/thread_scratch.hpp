// SPDX-License-Identifier: MIT
// Per-thread scratch that keeps its capacity from call to call (a turn's
// event lists, the write planner's work lists), so a steady stream of
// transfers allocates nothing for them. It may be asked for after the
// thread's thread_local objects were destroyed: an engine torn down by a
// static destructor runs turns on the main thread after that. Then
// thread_scratch() returns null and the caller uses a local object.
#pragma once

namespace hmemreg::engine {

template <class T> struct ThreadScratch {
	T value;
	// Trivially destructible: still readable after the destructors ran.
	static inline thread_local bool gone = false;
	~ThreadScratch() { gone = true; }
};

template <class T> T *thread_scratch()
{
	if (ThreadScratch<T>::gone)
		return nullptr;
	thread_local ThreadScratch<T> s;
	return &s.value;
}

} // namespace hmemreg::engine
