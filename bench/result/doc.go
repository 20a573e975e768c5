// Package result is the data model of kvbench's output: one Report holding
// the runs measured against kvd and the raw transport baselines they are
// compared with. It owns the JSON and CSV encodings (the JSON file is what
// `kvbench report` merges), the choice of the baseline each run is compared
// to, and the extraction of a report printed between markers on a console
// (how results leave the RDMA VM).
package result
