//go:build rdma

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <netinet/in.h>
#include "shim.h"

int kvd_query_device(struct ibv_context *ctx, struct kvd_dev_attr *out)
{
	struct ibv_device_attr a;
	int ret = ibv_query_device(ctx, &a);
	if (ret)
		return -ret;
	out->max_qp_wr = a.max_qp_wr;
	out->max_cqe = a.max_cqe;
	out->max_qp_rd_atom = a.max_qp_rd_atom;
	out->max_qp_init_rd_atom = a.max_qp_init_rd_atom;
	out->max_sge = a.max_sge;
	return 0;
}

int kvd_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

// The CQ's context is a plain number (its index), never a Go pointer.
struct ibv_cq *kvd_create_cq(struct ibv_context *ctx, int size, uint64_t cookie,
			     struct ibv_comp_channel *ch)
{
	return ibv_create_cq(ctx, size, (void *)(uintptr_t)cookie, ch, 0);
}

int kvd_poll(struct ibv_cq *cq, struct kvd_wc *out, int max)
{
	struct ibv_wc wc[32];
	int total = 0;
	while (total < max) {
		int want = max - total < 32 ? max - total : 32;
		int n = ibv_poll_cq(cq, want, wc);
		if (n < 0)
			return total ? total : -EIO;
		for (int i = 0; i < n; i++) {
			out[total + i].wr_id = wc[i].wr_id;
			out[total + i].status = wc[i].status;
			out[total + i].opcode = wc[i].opcode;
			out[total + i].byte_len = wc[i].byte_len;
			out[total + i].vendor_err = wc[i].vendor_err;
		}
		total += n;
		if (n < want)
			break;
	}
	return total;
}

// kvd_cq_events takes every pending completion event off the channel,
// acknowledges it at once (ibv_destroy_cq waits for acknowledgements) and
// re-arms its CQ for solicited completions (poller.go, "Arming") before
// the caller polls it, so no message goes unnoticed. It stores each CQ's
// context and returns how many, or -EAGAIN when there was none.
int kvd_cq_events(struct ibv_comp_channel *ch, uint64_t *ctxs, int max)
{
	int n = 0;
	while (n < max) {
		struct ibv_cq *cq;
		void *ctx;
		if (ibv_get_cq_event(ch, &cq, &ctx)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return n ? n : -errno;
		}
		ibv_ack_cq_events(cq, 1);
		ibv_req_notify_cq(cq, 1);
		ctxs[n++] = (uint64_t)(uintptr_t)ctx;
	}
	return n ? n : -EAGAIN;
}

// kvd_post_reads posts n READs as one chain (one doorbell). Only the last is
// signalled: a chain completes in order, and a failing READ reports itself
// whatever its flags. All carry wr_id so any completion names the batch.
int kvd_post_reads(struct ibv_qp *qp, uint32_t lkey, const struct kvd_rd *rds, int n, uint64_t wr_id)
{
	struct ibv_send_wr wr[n], *bad;
	struct ibv_sge sge[n];
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		sge[i].addr = rds[i].laddr;
		sge[i].length = rds[i].len;
		sge[i].lkey = lkey;
		wr[i].wr_id = wr_id;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_READ;
		wr[i].send_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
		wr[i].wr.rdma.remote_addr = rds[i].raddr;
		wr[i].wr.rdma.rkey = rds[i].rkey;
		wr[i].next = i == n - 1 ? NULL : &wr[i + 1];
	}
	return ibv_post_send(qp, wr, &bad);
}

// kvd_post_keepalive posts one signalled zero-length RDMA READ: it needs no
// memory on either side (nor a key: IB C9-88), only an answer from the
// peer's device.
int kvd_post_keepalive(struct ibv_qp *qp, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.num_sge = 0;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(qp, &wr, &bad);
}

// kvd_post_sends posts n SENDs as one chain, each with its own flags:
// signalled (its completion retires it and the unsignalled ones before it),
// inline (the bytes are copied into the work request now). Every SEND is
// solicited: its receive completion raises an event on the peer's CQ,
// which is armed for solicited completions only (poller.go, "Arming").
int kvd_post_sends(struct ibv_qp *qp, uint32_t lkey, const struct kvd_sd *sds, int n)
{
	struct ibv_send_wr wr[n], *bad;
	struct ibv_sge sge[n];
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		sge[i].addr = sds[i].laddr;
		sge[i].length = sds[i].len;
		sge[i].lkey = lkey;
		wr[i].wr_id = sds[i].wr_id;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = ((sds[i].flags & KVD_SD_SIGNALED) ? IBV_SEND_SIGNALED : 0) |
				   ((sds[i].flags & KVD_SD_INLINE) ? IBV_SEND_INLINE : 0) | IBV_SEND_SOLICITED;
		wr[i].next = i == n - 1 ? NULL : &wr[i + 1];
	}
	return ibv_post_send(qp, wr, &bad);
}

// kvd_post_recvs posts receive buffers base + idx[i]*size, with work-request
// ids wr_base | idx[i].
int kvd_post_recvs(struct ibv_qp *qp, uint32_t lkey, uint64_t base, uint32_t size,
		   const uint16_t *idx, int n, uint64_t wr_base)
{
	struct ibv_recv_wr wr[n], *bad;
	struct ibv_sge sge[n];
	for (int i = 0; i < n; i++) {
		sge[i].addr = base + (uint64_t)idx[i] * size;
		sge[i].length = size;
		sge[i].lkey = lkey;
		wr[i].wr_id = wr_base | idx[i];
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].next = i == n - 1 ? NULL : &wr[i + 1];
	}
	return ibv_post_recv(qp, wr, &bad);
}

// kvd_cm_get copies the next event off a non-blocking channel and
// acknowledges it (rdma_destroy_id waits for acknowledgements). Returns 0,
// or -errno (-EAGAIN: no event).
int kvd_cm_get(struct rdma_event_channel *ch, struct kvd_cm_event *ev)
{
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(ch, &e))
		return -errno;
	memset(ev, 0, sizeof(*ev));
	ev->event = e->event;
	ev->status = e->status;
	ev->id = e->id;
	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST || e->event == RDMA_CM_EVENT_ESTABLISHED ||
	    e->event == RDMA_CM_EVENT_CONNECT_RESPONSE || e->event == RDMA_CM_EVENT_REJECTED) {
		int len = e->param.conn.private_data_len;
		if (len > (int)sizeof(ev->pdata))
			len = sizeof(ev->pdata);
		if (e->param.conn.private_data && len > 0)
			memcpy(ev->pdata, e->param.conn.private_data, len);
		else
			len = 0;
		ev->pdata_len = len;
		ev->responder_resources = e->param.conn.responder_resources;
		ev->initiator_depth = e->param.conn.initiator_depth;
	}
	rdma_ack_cm_event(e);
	return 0;
}

int kvd_set_addr(struct sockaddr_storage *ss, const uint8_t *ip, int iplen, int port)
{
	memset(ss, 0, sizeof(*ss));
	if (iplen == 4) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, ip, 4);
		return 0;
	}
	if (iplen == 16) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, ip, 16);
		return 0;
	}
	return -EINVAL;
}

int kvd_get_addr(struct sockaddr *sa, uint8_t *ip, int *iplen, int *port)
{
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)sa;
		memcpy(ip, &sin->sin_addr, 4);
		*iplen = 4;
		*port = ntohs(sin->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sa;
		memcpy(ip, &sin6->sin6_addr, 16);
		*iplen = 16;
		*port = ntohs(sin6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

// kvd_create_qp creates the id's RC queue pair; *got_inline is the inline
// size the device granted (it may round max_inline up).
struct ibv_qp *kvd_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq,
			     int send_wr, int recv_wr, int max_inline, int *got_inline)
{
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = send_wr;
	a.cap.max_recv_wr = recv_wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = max_inline;
	a.sq_sig_all = 0;
	if (rdma_create_qp(id, pd, &a))
		return NULL;
	*got_inline = a.cap.max_inline_data;
	return id->qp;
}

// kvd_id_options sets an id's type of service (tos, if not negative) and
// local ACK timeout exponent (ack_exp, if positive). TOS must be set before
// the route is resolved, the ACK timeout before the QP's RTS transition
// (rdma_init_qp_attr applies it).
int kvd_id_options(struct rdma_cm_id *id, int tos, int ack_exp)
{
	uint8_t v;
	if (tos >= 0) {
		v = tos;
		if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, sizeof(v)))
			return errno ? -errno : -EIO;
	}
	if (ack_exp > 0) {
		v = ack_exp;
		if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &v, sizeof(v)))
			return errno ? -errno : -EIO;
	}
	return 0;
}

// Both ends set rnr_retry_count 0: credits guarantee a posted receive for
// every SEND, so an RNR NAK is a bug and should fail loudly, not stall.
static void conn_param(struct rdma_conn_param *p, const uint8_t *pdata, int len, int resp_res, int init_depth,
		       int retry)
{
	memset(p, 0, sizeof(*p));
	p->private_data = pdata;
	p->private_data_len = len;
	p->responder_resources = resp_res;
	p->initiator_depth = init_depth;
	p->retry_count = retry;
	p->rnr_retry_count = 0;
}

// Queue pairs are moved to RTS by us, not by librdmacm, so that they get no
// remote access rights until we grant them (kvd_qp_access): librdmacm would
// grant what the connection manager computes (remote READ, WRITE and
// atomics) before the first message could be checked. The QP is detached
// from the id (id->qp NULL, its number passed in the connection parameters)
// while librdmacm would touch it: from kvd_connect until kvd_establish on the
// active side (librdmacm then reports RDMA_CM_EVENT_CONNECT_RESPONSE instead
// of moving the QP itself), and inside kvd_accept on the passive side. After
// that it is attached again, so rdma_disconnect moves it to the error state
// and rdma_destroy_qp frees it as before.

// qp_to_rts does librdmacm's INIT, RTR and RTS transitions with the
// attributes the connection manager computes, except the remote access
// rights (access) and, when not negative, the READ depths. It stores the
// remote QP number in *dest_qpn.
static int qp_to_rts(struct rdma_cm_id *id, struct ibv_qp *qp, int access, int resp_res,
		     int init_depth, int retry, uint32_t *dest_qpn)
{
	struct ibv_qp_attr a;
	struct ibv_port_attr pa;
	int mask, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	if (rdma_init_qp_attr(id, &a, &mask))
		return errno ? -errno : -EIO;
	a.qp_access_flags = access;
	if ((ret = ibv_modify_qp(qp, &a, mask | IBV_QP_ACCESS_FLAGS)))
		return -ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(id, &a, &mask))
		return errno ? -errno : -EIO;
	// As librdmacm: an rdma_ucm bug sets RoCE-only bits on InfiniBand.
	if (!ibv_query_port(id->verbs, id->port_num, &pa) && pa.link_layer == IBV_LINK_LAYER_INFINIBAND)
		mask &= ~0xe00000;
	if (resp_res >= 0)
		a.max_dest_rd_atomic = resp_res;
	*dest_qpn = a.dest_qp_num;
	if ((ret = ibv_modify_qp(qp, &a, mask)))
		return -ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(id, &a, &mask))
		return errno ? -errno : -EIO;
	if (init_depth >= 0)
		a.max_rd_atomic = init_depth;
	// The connection manager carries the dialer's retry count to both
	// ends; each end uses its own.
	a.retry_cnt = retry;
	return -ibv_modify_qp(qp, &a, mask | IBV_QP_RETRY_CNT);
}

int kvd_connect(struct rdma_cm_id *id, const uint8_t *pdata, int len, int resp_res, int init_depth, int retry)
{
	struct rdma_conn_param p;
	struct ibv_qp *qp = id->qp;
	conn_param(&p, pdata, len, resp_res, init_depth, retry);
	p.qp_num = qp->qp_num;
	id->qp = NULL;
	if (rdma_connect(id, &p)) {
		int e = errno;
		id->qp = qp;
		return -e;
	}
	return 0;
}

// kvd_establish finishes the active side after RDMA_CM_EVENT_CONNECT_RESPONSE:
// the QP to RTS with the given access, then the connection manager's RTU.
int kvd_establish(struct rdma_cm_id *id, struct ibv_qp *qp, int access, int retry, uint32_t *dest_qpn)
{
	int ret = qp_to_rts(id, qp, access, -1, -1, retry, dest_qpn);
	if (!ret && rdma_establish(id))
		ret = errno ? -errno : -EIO;
	id->qp = qp;
	return ret;
}

int kvd_accept(struct rdma_cm_id *id, const uint8_t *pdata, int len, int resp_res, int init_depth,
	       int access, int retry, uint32_t *dest_qpn)
{
	struct rdma_conn_param p;
	struct ibv_qp *qp = id->qp;
	int ret;

	id->qp = NULL;
	ret = qp_to_rts(id, qp, access, resp_res, init_depth, retry, dest_qpn);
	if (!ret) {
		conn_param(&p, pdata, len, resp_res, init_depth, retry);
		p.qp_num = qp->qp_num;
		if (rdma_accept(id, &p))
			ret = errno ? -errno : -EIO;
	}
	id->qp = qp;
	return ret;
}

// kvd_qp_access sets the remote access rights of a QP in RTS.
int kvd_qp_access(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_access_flags = access;
	return -ibv_modify_qp(qp, &a, IBV_QP_ACCESS_FLAGS);
}

// kvd_destroy_qp attaches qp to id (it may still be detached) and destroys
// it.
void kvd_destroy_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	id->qp = qp;
	rdma_destroy_qp(id);
}

// kvd_post_write posts one signalled RDMA WRITE. The transport never writes
// remotely: only tests use it, to prove that regions and queue pairs refuse
// remote writes.
int kvd_post_write(struct ibv_qp *qp, uint32_t lkey, uint64_t laddr, uint64_t raddr, uint32_t rkey,
		   uint32_t len, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	memset(&wr, 0, sizeof(wr));
	sge.addr = laddr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

// kvd_query_qp reports the QP attributes tests check (tuning and limits).
int kvd_query_qp(struct ibv_qp *qp, struct kvd_qp_info *out)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int ret = ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_CAP | IBV_QP_ACCESS_FLAGS, &ia);
	if (ret)
		return -ret;
	out->state = a.qp_state;
	out->timeout = a.timeout;
	out->retry_cnt = a.retry_cnt;
	out->rnr_retry = a.rnr_retry;
	out->traffic_class = a.ah_attr.grh.traffic_class;
	out->max_rd_atomic = a.max_rd_atomic;
	out->max_dest_rd_atomic = a.max_dest_rd_atomic;
	out->max_inline_data = a.cap.max_inline_data;
	out->access = a.qp_access_flags;
	return 0;
}

// kvd_qp_silence moves qp to RESET without telling the connection manager:
// it then drops everything the peer sends and answers nothing, as a dead
// host would. Tests only.
int kvd_qp_silence(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	return -ibv_modify_qp(qp, &a, IBV_QP_STATE);
}
