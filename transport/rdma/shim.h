//go:build rdma

// The C half of package rdma: small helpers so that each cgo crossing does a
// whole batch (a chain of work requests, a burst of completions, one
// connection-manager event copied out and acknowledged).
#ifndef KVD_RDMA_SHIM_H
#define KVD_RDMA_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// One completion, reduced to what Go needs.
struct kvd_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t vendor_err;
};

// One READ of a chain: remote address and key, local address, length.
struct kvd_rd {
	uint64_t raddr;
	uint64_t laddr;
	uint32_t len;
	uint32_t rkey;
};

// One SEND: local address and length, its work-request id and flags.
struct kvd_sd {
	uint64_t laddr;
	uint64_t wr_id;
	uint32_t len;
	uint32_t flags; // KVD_SD_SIGNALED, KVD_SD_INLINE
};

#define KVD_SD_SIGNALED 1
#define KVD_SD_INLINE 2

// A connection-manager event, copied out so it can be acknowledged at once.
struct kvd_cm_event {
	int32_t event;
	int32_t status;
	struct rdma_cm_id *id;
	uint8_t pdata[64];
	uint8_t pdata_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
};

struct kvd_dev_attr {
	int max_qp_wr;
	int max_cqe;
	int max_qp_rd_atom;
	int max_qp_init_rd_atom;
	int max_sge;
};

// What tests check of a queue pair (kvd_query_qp).
struct kvd_qp_info {
	int state;
	int timeout;
	int retry_cnt;
	int rnr_retry;
	int traffic_class;
	int max_rd_atomic;
	int max_dest_rd_atomic;
	int max_inline_data;
	int access;
};

int kvd_query_qp(struct ibv_qp *qp, struct kvd_qp_info *out);
int kvd_qp_silence(struct ibv_qp *qp);
int kvd_query_device(struct ibv_context *ctx, struct kvd_dev_attr *out);
int kvd_set_nonblock(int fd);

struct ibv_cq *kvd_create_cq(struct ibv_context *ctx, int size, uint64_t cookie,
			     struct ibv_comp_channel *ch);
int kvd_poll(struct ibv_cq *cq, struct kvd_wc *out, int max);
int kvd_cq_events(struct ibv_comp_channel *ch, uint64_t *ctxs, int max);
int kvd_post_reads(struct ibv_qp *qp, uint32_t lkey, const struct kvd_rd *rds, int n, uint64_t wr_id);
int kvd_post_keepalive(struct ibv_qp *qp, uint64_t wr_id);
int kvd_post_sends(struct ibv_qp *qp, uint32_t lkey, const struct kvd_sd *sds, int n);
int kvd_post_recvs(struct ibv_qp *qp, uint32_t lkey, uint64_t base, uint32_t size,
		   const uint16_t *idx, int n, uint64_t wr_base);

int kvd_cm_get(struct rdma_event_channel *ch, struct kvd_cm_event *ev);
int kvd_set_addr(struct sockaddr_storage *ss, const uint8_t *ip, int iplen, int port);
int kvd_get_addr(struct sockaddr *sa, uint8_t *ip, int *iplen, int *port);
struct ibv_qp *kvd_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq,
			     int send_wr, int recv_wr, int max_inline, int *got_inline);
int kvd_id_options(struct rdma_cm_id *id, int tos, int ack_exp);
int kvd_connect(struct rdma_cm_id *id, const uint8_t *pdata, int len, int resp_res, int init_depth, int retry);
int kvd_establish(struct rdma_cm_id *id, struct ibv_qp *qp, int access, int retry, uint32_t *dest_qpn);
int kvd_accept(struct rdma_cm_id *id, const uint8_t *pdata, int len, int resp_res, int init_depth,
	       int access, int retry, uint32_t *dest_qpn);
int kvd_qp_access(struct ibv_qp *qp, int access);
void kvd_destroy_qp(struct rdma_cm_id *id, struct ibv_qp *qp);
int kvd_post_write(struct ibv_qp *qp, uint32_t lkey, uint64_t laddr, uint64_t raddr, uint32_t rkey,
		   uint32_t len, uint64_t wr_id);

#endif
