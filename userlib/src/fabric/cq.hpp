// SPDX-License-Identifier: MIT
// Completion queue in FI_CQ_FORMAT_DATA (op context, flags, len, remote CQ data).
#pragma once

#include <string>

#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include "fabric/fid.hpp"

namespace hmemreg::fabric {

class CompletionQueue {
public:
	CompletionQueue() = default;
	CompletionQueue(fid_domain *domain, size_t size);

	// Up to n entries; returns the count, 0 when empty, -FI_EAVAIL when an error
	// entry is at the head (read it with read_error), throws on other errors.
	ssize_t read(fi_cq_data_entry *out, size_t n);
	// Pops the error entry; `text` gets the provider's explanation.
	fi_cq_err_entry read_error(std::string &text);

	fid_cq *get() const { return cq_.get(); }

private:
	Fid<fid_cq> cq_;
};

} // namespace hmemreg::fabric
