/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmemreg memory providers: the in-kernel interface through which a driver
 * that owns memory lets hmemreg.ko export ranges of it as DMA-BUFs, with
 * every attachment, pin and map recorded in the pin ledger.
 *
 * A provider describes one exported range through @priv (its own object);
 * the export core owns the dma-buf and calls back:
 *
 *   map     build an sg_table of the whole range mapped for @dev (called
 *           with the dma-buf's reservation lock held for dynamic importers;
 *           must not take it). Return ERR_PTR on failure.
 *   unmap   undo map.
 *   pin     optional: the range must stay where it is until unpin (called
 *           with the reservation lock held). Providers whose memory never
 *           moves (both built-in ones) leave it NULL.
 *   unpin   optional, pairs with pin.
 *   mmap    optional: map the range into a user VMA (offset in vm_pgoff).
 *   release the last reference to the export is gone: free @priv.
 *   state   optional: extra HMEMREG_EXP_STATE_* bits of @priv for the
 *           ledger (called under a spinlock: must not sleep).
 *
 * A provider whose memory is another dma-buf (HMEMREG_PROV_FORWARDS)
 * keeps state per attachment and leaves map/unmap/pin/unpin above NULL:
 *
 *   attach    attach to the inner buffer for @attach's device (dynamic
 *             when @attach is); store the provider's state in *@att.
 *             Called without the reservation lock. Return 0 or -errno
 *             (the importer's attach fails with it).
 *   detach    undo attach (without the reservation lock).
 *   pin_att / unpin_att / map_att / unmap_att: as pin / unpin / map /
 *             unmap, for one attachment (reservation lock held).
 *   resv      the inner buffer's reservation object, which the export
 *             then shares (one lock for both buffers).
 *   describe  the inner exporter's name for the ledger.
 *   can_vmap  whether the inner buffer has a kernel mapping to offer;
 *             where not, the export has no vmap op at all.
 *   mmap      with FORWARDS, the provider's mapping stays as it made it
 *             (the inner buffer's file and vm_ops; not counted as a user
 *             mmap of this export).
 *
 * A provider that HMEMREG_IOC_EXPORT may name by its id also has:
 *
 *   check   optional: refuse the request (@watch: it asks for
 *           HMEMREG_EXPORT_WATCH) before anything is done for it, before
 *           its watch is armed; returns 0 or the ioctl's error.
 *   create  make @priv for the requested range, for the calling process
 *           and its open /dev/hmemreg @ctx. Return ERR_PTR on failure.
 *           Providers without it are exported only through hmemreg_buf_create().
 *
 * Peer-to-peer: memory that lives in a device BAR (real accelerator memory)
 * can only be reached by importers allowed to do PCI peer-to-peer. Such a
 * provider sets HMEMREG_PROV_NEEDS_P2P; the export core then refuses
 * attachments whose importer did not ask for peer2peer with -EOPNOTSUPP,
 * and, because Debian's 6.1 kernel is built without CONFIG_PCI_P2PDMA (so
 * pci_p2pdma_distance() always fails), with -EOPNOTSUPP for every importer
 * on such kernels. The error is returned at attach time, never as a silent
 * failure later. The built-in providers hand out system RAM, which every
 * DMA-capable importer reaches, so they do not set the flag.
 *
 * A provider for NVIDIA's nvidia_p2p_get_pages() (designed, not built: no
 * NVIDIA kernel headers here) would: pin on export with the free callback
 * set, map with nvidia_p2p_dma_map_pages() for the importer's PCI device,
 * set HMEMREG_PROV_NEEDS_P2P, and from the free callback post an event and
 * mark the export revoked so map fails with -ENODEV from then on.
 */
#ifndef HMEMREG_PROVIDER_H
#define HMEMREG_PROVIDER_H

#include <linux/bits.h>
#include <linux/dma-buf.h>
#include <linux/dma-direction.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/scatterlist.h>

struct device;
struct hmemreg_ctx;
struct hmemreg_export_desc;
struct vm_area_struct;

#define HMEMREG_PROV_NEEDS_P2P	BIT(0)
#define HMEMREG_PROV_FORWARDS	BIT(1)	/* memory of another dma-buf */

struct hmemreg_provider_ops {
	struct sg_table *(*map)(void *priv, struct device *dev,
				enum dma_data_direction dir);
	void (*unmap)(void *priv, struct device *dev, struct sg_table *sgt,
		      enum dma_data_direction dir);
	int (*pin)(void *priv);
	void (*unpin)(void *priv);
	int (*mmap)(void *priv, struct vm_area_struct *vma);
	/* Optional: one kernel mapping of the whole range (CPU importers). */
	void *(*vmap)(void *priv);
	void (*vunmap)(void *priv, void *vaddr);
	void (*release)(void *priv);
	u32 (*state)(void *priv);
	int (*check)(struct hmemreg_ctx *ctx,
		     const struct hmemreg_export_desc *desc, bool watch);
	void *(*create)(struct hmemreg_ctx *ctx,
			const struct hmemreg_export_desc *desc);
	/* HMEMREG_PROV_FORWARDS providers, see above. */
	int (*attach)(void *priv, struct dma_buf_attachment *attach, void **att);
	void (*detach)(void *priv, void *att);
	int (*pin_att)(void *att);
	void (*unpin_att)(void *att);
	struct sg_table *(*map_att)(void *att, enum dma_data_direction dir);
	void (*unmap_att)(void *att, struct sg_table *sgt,
			  enum dma_data_direction dir);
	struct dma_resv *(*resv)(void *priv);
	/* Optional: whether vmap can succeed for @priv (else not offered). */
	bool (*can_vmap)(void *priv);
	void (*describe)(void *priv, char *name, size_t size);
};

/**
 * struct hmemreg_provider - a source of exportable memory
 * @name:  short name (ledger, debugfs)
 * @id:    HMEMREG_PROVIDER_* for built-in ones; assigned by register
 * @flags: HMEMREG_PROV_* bits
 * @owner: module providing @ops
 * @ops:   callbacks above
 * @node:  registry list (owned by hmemreg)
 */
struct hmemreg_provider {
	const char *name;
	u32 id;
	u32 flags;
	struct module *owner;
	const struct hmemreg_provider_ops *ops;
	struct list_head node;
};

/**
 * struct hmemreg_export_desc - what is being exported (for the ledger)
 * @addr:   user VA, or offset inside @handle
 * @len:    bytes, page aligned
 * @handle: provider handle, 0 if none
 * @cookie: caller's cookie
 * @writable: importers may write
 */
struct hmemreg_export_desc {
	u64 addr;
	u64 len;
	u64 handle;
	u64 cookie;
	bool writable;
};

int hmemreg_provider_register(struct hmemreg_provider *prov);
void hmemreg_provider_unregister(struct hmemreg_provider *prov);

/*
 * hmemreg_buf_create() - export @priv of @prov as a new dma-buf.
 * On success the dma-buf owns @priv (released through ops->release); on
 * failure @priv is untouched and still the caller's. @id receives the
 * ledger id. The caller publishes the dma-buf (fd) as its very last step.
 */
struct dma_buf *hmemreg_buf_create(struct hmemreg_provider *prov, void *priv,
				   const struct hmemreg_export_desc *desc,
				   u64 *id);

/*
 * Helpers for providers whose memory is a page array. Map builds segments
 * within what @dev declares (max segment size, segment boundary) and what
 * its DMA path maps in one piece (dma_max_mapping_size(): swiotlb).
 */
struct sg_table *hmemreg_pages_map(struct page **pages, unsigned long npages,
				   struct device *dev,
				   enum dma_data_direction dir);
void hmemreg_pages_unmap(struct device *dev, struct sg_table *sgt,
			 enum dma_data_direction dir);
void *hmemreg_pages_vmap(struct page **pages, unsigned long npages);
void hmemreg_pages_vunmap(void *vaddr);

#endif /* HMEMREG_PROVIDER_H */
