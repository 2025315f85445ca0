package simulate

// Report is the placement the scheduler chose.
type Report struct {
	Env        string       `json:"env"`
	Pools      []PoolReport `json:"pools"`
	Pending    []Pending    `json:"pending"`
	Preempted  []string     `json:"preempted"`
	Violations []Violation  `json:"violations"`
	// Failure is what became of the pods of the nodes Options.FailNodes took away; nil without.
	Failure *Failure `json:"failure,omitempty"`
	// Scaled says, for each Deployment Options.Scale set, how many of its pods the scheduler
	// placed in the end.
	Scaled []Scaled `json:"scaled,omitempty"`
}

// Scaled is a Deployment run at a set replica count, and what became of its pods.
type Scaled struct {
	Deployment string `json:"deployment"`
	Replicas   int64  `json:"replicas"`
	// Why says where the count comes from (e.g. a traffic profile's peak).
	Why     string `json:"why,omitempty"`
	Placed  int    `json:"placed"`
	Pending int    `json:"pending"`
}

// Failure is a node failure played after the first placement settled: the nodes went, their
// pods with them, and the controllers and the scheduler did the rest.
type Failure struct {
	// Zones are the zones taken away (--fail-zone); Nodes every node taken away.
	Zones []string `json:"zones,omitempty"`
	Nodes []string `json:"nodes"`
	// Lost are the pods that ran on them, node agents (DaemonSets' pods) aside.
	Lost []string `json:"lost"`
	// Replaced are the pods the controllers made since, where the scheduler put them (Pending
	// in the report's pending when it put them nowhere).
	Replaced []Placement `json:"replaced"`
}

// Placement is a pod and its node.
type Placement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// PoolReport sums one pool.
type PoolReport struct {
	Pool     string   `json:"pool"`
	Nodes    int      `json:"nodes"`
	Pods     []string `json:"pods"`
	GPUs     int64    `json:"gpus"`
	GPUsUsed int64    `json:"gpusUsed"`
}

// Pending is a pod the scheduler could not place, with its reason.
type Pending struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Violation is a pod in the wrong place.
type Violation struct {
	Rule    string `json:"rule"`
	Pod     string `json:"pod"`
	Node    string `json:"node"`
	Message string `json:"message"`
}
