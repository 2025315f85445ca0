package drift

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// A Step adds to the drifted objects of a finished audit what only the auditor's caller knows
// (this platform's GPU cost of a drift, say), reading what the audit compared. The engine runs
// its caller's steps; it knows none of them.
type Step interface {
	// Start is called once per merged report; what it returns is called on each drifted object
	// the audit found, in the report's order.
	Start(c Compared) func(o *Object)
}

// Compared is what an audit compared, for a Step: the renders of its Applications and the live
// objects it read.
type Compared interface {
	// Rendered lists the objects of a kind that the report's Applications render.
	Rendered(kind string) []*unstructured.Unstructured
	// Desired is the object r as o's Application renders it.
	Desired(o *Object, r Ref) (*unstructured.Unstructured, bool)
	// Live is o's live object, as the audit read it.
	Live(o *Object) (*unstructured.Unstructured, bool)
}
