package profile

// Proposal is the settings a profile asks for, each with its arithmetic.
type Proposal struct {
	// PerReplica is the requests a second one replica is planned for: its saturated throughput
	// × the utilization target.
	PerReplica float64 `json:"perReplicaRequestsPerSecond"`
	// Threshold is the queue-depth trigger's threshold.
	Threshold Change `json:"threshold"`
	// Minimums are the minimum replicas of each day of the week, in hour ranges.
	Minimums []DayMinimums `json:"minimums"`
	// Peaks are the peaks found, with what the schedule does about each.
	Peaks []Peak `json:"peaks"`
	// Lead is the schedule's lead time, which each peak's scale-up fires ahead of its start.
	Lead string `json:"leadTime,omitempty"`
	// Cost is the GPU cost of a typical week now and at the proposed minimums.
	Cost *Cost `json:"cost,omitempty"`
	// Notes say what could not be proposed, and why.
	Notes []string `json:"notes,omitempty"`
}

// Cost is what a typical week of the profile costs in GPUs when the autoscaler follows the load
// above a floor: now, the warm minimum all week; proposed, the minimums by hour.
type Cost struct {
	Basis                                     string  `json:"basis"`
	NowUSDPerWeek, ProposedUSDPerWeek         float64 `json:"-"`
	NowUSDPer1kTokens, ProposedUSDPer1kTokens float64 `json:"-"`
	Now                                       string  `json:"now"`
	Proposed                                  string  `json:"proposed"`
}

// Change is a setting now and proposed.
type Change struct {
	Now        float64 `json:"now"`
	Proposed   float64 `json:"proposed"`
	Arithmetic string  `json:"arithmetic"`
}

// DayMinimums are one day's minimum replicas by hour range.
type DayMinimums struct {
	Day    string       `json:"day"`
	Ranges []HourRanges `json:"ranges"`
}

// HourRanges is a minimum that holds from hour From to hour To (exclusive).
type HourRanges struct {
	From     int   `json:"from"`
	To       int   `json:"to"`
	Replicas int64 `json:"replicas"`
}

// Peak kinds.
const (
	Weekly  = "weekly"  // the same hours on the same weekdays of every week
	Monthly = "monthly" // hours above the week's pattern on days of the month
)

// Peak is a peak found in the profile.
type Peak struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Cron is a weekly peak's start; DaysOfMonth a monthly one's days and At its start.
	Cron        string `json:"cron,omitempty"`
	DaysOfMonth []int  `json:"daysOfMonth,omitempty"`
	At          string `json:"at"`
	Duration    string `json:"duration"`
	// Seen are the dates it was seen on (monthly peaks).
	Seen []string `json:"seen,omitempty"`
	// RequestsPerSecond is the highest hourly rate in it; Warm the replicas it needs.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	Warm              int64   `json:"warm"`
	// LowerBound is true when requests waited in the peak's hours: its rate is what vLLM
	// finished, and Warm may be too few.
	LowerBound bool   `json:"lowerBound,omitempty"`
	Arithmetic string `json:"arithmetic"`
	// Overlaps are the peaks of the same field, in the schedule or proposed, whose raises (fire
	// time to end) meet an added peak's. The schedule composes them: a scale-down restores the
	// field's value without the peaks that ended, and never goes under one still raising it.
	Overlaps []string `json:"overlaps,omitempty"`
	// Action is "covered" (a schedule peak holds every occurrence at enough replicas), "raise"
	// (it holds them with too few: CoveredBy's warm count goes to Warm) or "add".
	Action    string `json:"action"`
	CoveredBy string `json:"coveredBy,omitempty"`
	// Entry is the schedule.yaml entry to add (Action "add").
	Entry string `json:"entry,omitempty"`
}

// Actions of a found peak.
const (
	Covered = "covered"
	Raise   = "raise"
	Add     = "add"
)
