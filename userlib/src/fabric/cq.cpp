// SPDX-License-Identifier: MIT
#include "fabric/cq.hpp"

#include "fabric/abi.hpp"
#include "fabric/error.hpp"

namespace hmemreg::fabric {

CompletionQueue::CompletionQueue(fid_domain *domain, size_t size)
{
	fi_cq_attr attr{};
	attr.size = size;
	attr.format = FI_CQ_FORMAT_DATA;
	attr.wait_obj = FI_WAIT_NONE; // progress is polled: by our threads or the caller
	fid_cq *cq = nullptr;
	check(fi_cq_open(domain, &attr, &cq, nullptr), "fi_cq_open");
	cq_ = Fid<fid_cq>(cq);
}

ssize_t CompletionQueue::read(fi_cq_data_entry *out, size_t n)
{
	ssize_t rc = fi_cq_read(cq_.get(), out, n);
	if (rc == -FI_EAGAIN)
		return 0;
	if (rc == -FI_EAVAIL)
		return rc;
	return check(rc, "fi_cq_read");
}

fi_cq_err_entry CompletionQueue::read_error(std::string &text)
{
	CqErrEntry storage; // a 1.20+ runtime writes past a 1.17 fi_cq_err_entry
	fi_cq_err_entry &e = storage.entry;
	ssize_t rc = fi_cq_readerr(cq_.get(), &e, 0);
	check(rc, "fi_cq_readerr");
	const char *s = fi_cq_strerror(cq_.get(), e.prov_errno, e.err_data, nullptr, 0);
	text = fi_strerror(e.err);
	if (s && *s) {
		text += " (";
		text += s;
		text += ")";
	}
	return e;
}

} // namespace hmemreg::fabric
