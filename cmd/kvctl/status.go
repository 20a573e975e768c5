package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kvd-project/kvd/client"
)

const endpointUsage = "endpoint health | status"

func runEndpoint(ctx context.Context, e *env, args []string) error {
	switch args[0] {
	case "health":
		return runHealth(ctx, e, nil)
	case "status":
		return runStatus(ctx, e, nil)
	}
	return usageError{"usage: kvctl " + endpointUsage}
}

// clusterIDFlag is --cluster-id: the hex id status prints.
type clusterIDFlag client.ClusterID

func (f *clusterIDFlag) String() string {
	if *f == 0 {
		return ""
	}
	return client.ClusterID(*f).String()
}

func (f *clusterIDFlag) Set(s string) error {
	id, err := client.ParseClusterID(s)
	*f = clusterIDFlag(id)
	return err
}

type endpointStatus struct {
	Endpoint string `json:"endpoint"`
	client.NodeStatus
	Error string `json:"error,omitempty"`
}

// runStatus shows every endpoint's status, then warns (on standard error,
// one line each) of what an operator must look at: endpoints that did not
// answer, of another cluster, without a leader, with more than one
// leader. Any of them makes it exit 1, as etcdctl endpoint status does for
// an endpoint that fails, so that a script can tell a sound cluster.
func runStatus(ctx context.Context, e *env, _ []string) error {
	out := make([]endpointStatus, len(e.eps))
	var wg sync.WaitGroup
	for i, ep := range e.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.c.Status(ctx, ep)
			out[i] = endpointStatus{Endpoint: ep, NodeStatus: st}
			if err != nil {
				out[i].Error = withoutAddr(err.Error(), ep)
			}
		}()
	}
	wg.Wait()
	if err := e.printStatus(out); err != nil {
		return err
	}
	problems := statusProblems(out, client.ClusterID(e.o.clusterID))
	for _, p := range problems {
		fmt.Fprintln(e.errOut, "kvctl: warning:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("status: %d problem(s) among %d endpoints (warnings above)", len(problems), len(out))
	}
	return nil
}

func (e *env) printStatus(out []endpointStatus) error {
	if e.o.write == "json" {
		return e.json(statusesJSON(out))
	}
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tID\tCLUSTER ID\tLEADER\tIS LEARNER\tTERM\tCOMMIT\tAPPLIED\tREAD LEASE\tKEYS\tDB SIZE\tFILL\tERROR")
	for _, s := range out {
		if s.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", s.Endpoint, s.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%v\t%d\t%d\t%d\t%v\t%d\t%s\t%s\t%s\n", s.Endpoint, s.ID, clusterText(s.ClusterID),
			s.LeaderID, s.IsLearner, s.Term, s.Commit, s.Applied, s.LeaseValid, s.Keys, bytesText(s.DBSize), fillPercent(s),
			s.StorageError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range out {
		switch {
		case s.Error != "" || s.TableFill < fullWarning:
		case s.TableFill >= 1:
			fmt.Fprintf(e.out, "warning: %s: table region full: PUTs that need more room are refused with \"no space\" (delete keys or raise --table-mem)\n", s.Endpoint)
		default:
			fmt.Fprintf(e.out, "warning: %s: table region %s full: PUTs will be refused with \"no space\" at 100%% (raise --table-mem)\n",
				s.Endpoint, fillPercent(s))
		}
	}
	return nil
}

// statusProblems lists what is wrong among the endpoints' statuses, one
// sentence each. The cluster they should all be of is want (--cluster-id),
// else the one most of them name (the first of those tied).
func statusProblems(out []endpointStatus, want client.ClusterID) []string {
	var problems []string
	byCluster := map[client.ClusterID][]string{}
	var order []client.ClusterID
	for _, s := range out {
		if s.Error != "" || s.ClusterID == 0 {
			continue
		}
		if byCluster[s.ClusterID] == nil {
			order = append(order, s.ClusterID)
		}
		byCluster[s.ClusterID] = append(byCluster[s.ClusterID], s.Endpoint)
	}
	whose := "given by --cluster-id"
	if want == 0 && len(order) > 0 {
		sort.SliceStable(order, func(i, j int) bool { return len(byCluster[order[i]]) > len(byCluster[order[j]]) })
		want, whose = order[0], "that of "+strings.Join(byCluster[order[0]], ", ")
	}
	var leaders []string
	for _, s := range out {
		switch {
		case s.Error != "":
			problems = append(problems, fmt.Sprintf("%s is unreachable: %s", s.Endpoint, s.Error))
			continue
		case s.StorageError != "":
			problems = append(problems, fmt.Sprintf("%s (node %d) stopped on a storage failure: %s", s.Endpoint, s.ID, s.StorageError))
		case s.ClusterID != 0 && s.ClusterID != want:
			problems = append(problems, fmt.Sprintf("%s (node %d) is a member of cluster %s, not of cluster %s (%s): it is another cluster's node",
				s.Endpoint, s.ID, s.ClusterID, want, whose))
		case s.LeaderID == 0:
			problems = append(problems, fmt.Sprintf("%s (node %d) has no leader (LEADER 0): an election is under way, or it cannot reach a quorum of members",
				s.Endpoint, s.ID))
		}
		if s.IsLeader {
			leaders = append(leaders, fmt.Sprintf("%s (node %d, cluster %s, term %d)", s.Endpoint, s.ID, clusterText(s.ClusterID), s.Term))
		}
	}
	if len(leaders) > 1 {
		problems = append(problems, fmt.Sprintf("%d endpoints say they lead: %s", len(leaders), strings.Join(leaders, "; ")))
	}
	return problems
}

func clusterText(id client.ClusterID) string {
	if id == 0 {
		return "-" // a node older than the field, or joining
	}
	return id.String()
}

// bytesText is n in SI units, as etcdctl shows DB SIZE.
func bytesText(n uint64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// withoutAddr drops the endpoint's address from an error that names it
// (the table already shows it once, in its own column).
func withoutAddr(msg, addr string) string {
	for _, s := range []string{"dial " + addr + ": ", "hello to " + addr + ": ", addr + ": ", " " + addr} {
		msg = strings.ReplaceAll(msg, s, "")
	}
	return msg
}

// fullWarning is the table fill (kvd_table_fill_ratio) from which status
// warns that writes will soon be refused (large values can be refused a
// little before 100% while free space is fragmented).
const fullWarning = 0.8

func fillPercent(s endpointStatus) string {
	if s.Error != "" {
		return "-"
	}
	return strconv.Itoa(int(100*s.TableFill)) + "%" // rounded down: 100% means full
}

// endpointHealth is one endpoint's health, as etcdctl endpoint health
// reports it.
type endpointHealth struct {
	Endpoint string `json:"endpoint"`
	Health   bool   `json:"health"`
	Took     string `json:"took"`
	Error    string `json:"error,omitempty"`
}

// runHealth checks every endpoint at once, as etcdctl endpoint health
// does: an endpoint is healthy if it serves a linearizable read (a
// ReadIndex round through it to a quorum; client.Health). It exits 1 if
// any is not.
func runHealth(ctx context.Context, e *env, _ []string) error {
	out := make([]endpointHealth, len(e.eps))
	var wg sync.WaitGroup
	for i, ep := range e.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := e.c.Health(ctx, ep)
			out[i] = endpointHealth{Endpoint: ep, Health: err == nil, Took: time.Since(start).String()}
			if err != nil {
				out[i].Error = strings.ReplaceAll(err.Error(), ep+": ", "") // the line names it
			}
		}()
	}
	wg.Wait()
	unhealthy := 0
	for _, h := range out {
		if !h.Health {
			unhealthy++
		}
	}
	switch e.o.write {
	case "json":
		if err := e.json(out); err != nil {
			return err
		}
	case "table":
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENDPOINT\tHEALTH\tTOOK\tERROR")
		for _, h := range out {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", h.Endpoint, h.Health, h.Took, h.Error)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	default:
		for _, h := range out {
			if h.Health {
				fmt.Fprintf(e.out, "%s is healthy: successfully committed proposal: took = %s\n", h.Endpoint, h.Took)
			} else {
				fmt.Fprintf(e.errOut, "%s is unhealthy: failed to commit proposal: %s\n", h.Endpoint, h.Error)
			}
		}
	}
	if unhealthy > 0 {
		return fmt.Errorf("unhealthy cluster: %d of %d endpoints unhealthy", unhealthy, len(out))
	}
	return nil
}
