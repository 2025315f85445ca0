package drift

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
)

// scalarEqual compares two leaf values the way the API server treats them: 8080 equals "8080"
// (int-or-string), and quantities compare by value ("1000m" = "1", "1Gi" = "1024Mi").
func scalarEqual(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	sa, sb := fmt.Sprint(a), fmt.Sprint(b)
	if sa == sb {
		return true
	}
	if !quantityLike(a) || !quantityLike(b) {
		return false
	}
	qa, err := resource.ParseQuantity(sa)
	if err != nil {
		return false
	}
	qb, err := resource.ParseQuantity(sb)
	if err != nil {
		return false
	}
	return qa.Cmp(qb) == 0
}

// quantityLike rules out booleans and empty strings before the quantity parser sees them.
func quantityLike(v any) bool {
	switch x := v.(type) {
	case string:
		return x != "" && (x[0] >= '0' && x[0] <= '9' || x[0] == '.' || x[0] == '+' || x[0] == '-')
	case int64, int, int32, float64, float32:
		return true
	default:
		return false
	}
}

// valueEqual compares desired with live: every field desired sets must be equal in live (extra live
// fields are defaults or other managers' business, judged elsewhere); lists must match item by item.
func valueEqual(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			if dv == nil {
				continue
			}
			lv, ok := l[k]
			if !ok {
				if isEmpty(dv) {
					continue
				}
				return false
			}
			if !valueEqual(dv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		if len(d) != len(l) {
			return false
		}
		for i := range d {
			if !valueEqual(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return scalarEqual(desired, live)
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// maskSecret replaces a Secret value by a short hash of its decoded bytes, so a report can say
// that a value changed, and that two values are the same, without carrying either.
func maskSecret(v any) any {
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return "(masked)"
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		raw = []byte(s)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// secretData folds a Secret's stringData into data (base64), as the API server does on write.
func secretData(obj map[string]any) {
	sd, ok := obj["stringData"].(map[string]any)
	if !ok {
		return
	}
	data, _ := obj["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		data[k] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(v)))
	}
	obj["data"] = data
	delete(obj, "stringData")
}
