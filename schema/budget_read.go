package schema

import "strconv"

// ReadBudget returns the budget facts of s. It never fails: values that cannot
// be used are skipped and listed in BudgetFacts.Invalid.
//
// Minimal version: reads the budget.* attributes only. Header fallbacks are
// added in the full contract.
func ReadBudget(s *Span) BudgetFacts {
	var f BudgetFacts
	for _, a := range s.Attrs {
		switch a.Key {
		case AttrRemainingMs:
			f.RemainingMs = f.number(a)
		case AttrTimeoutMs:
			f.TimeoutMs = f.number(a)
		case AttrPropagatedMs:
			f.PropagatedMs = f.number(a)
		case AttrBackoffMs:
			f.BackoffMs = f.number(a)
		case AttrAttempt:
			if v := f.number(a); v != nil && *v >= 1 {
				f.Attempt = uint32(*v)
			}
		case AttrMaxAttempts:
			if v := f.number(a); v != nil && *v >= 1 {
				f.MaxAttempts = uint32(*v)
			}
		case AttrSource:
			f.Source = BudgetSource(a.Value)
		case AttrRejected:
			f.Rejected = a.Value == "true"
		}
	}
	for _, e := range s.Events {
		if e.Name == EventCancelled {
			c := Cancellation{TimeNs: e.TimeNs}
			if src, ok := e.Attrs.Get(AttrCancelSource); ok {
				c.Source = src.Value
			}
			f.Cancellations = append(f.Cancellations, c)
		}
	}
	return f
}

func (f *BudgetFacts) number(a Attr) *float64 {
	v, err := strconv.ParseFloat(a.Value, 64)
	if err != nil {
		f.Invalid = append(f.Invalid, InvalidValue{Key: a.Key, Reason: "not a number"})
		return nil
	}
	return &v
}
