package invariants

import "testing"

func TestCheck(t *testing.T) {
	Check(true, "never")
	defer func() {
		r := recover()
		if Enabled && r == nil {
			t.Fatal("Check(false) did not panic with invariants enabled")
		}
		if !Enabled && r != nil {
			t.Fatalf("Check(false) panicked with invariants disabled: %v", r)
		}
	}()
	Check(false, "expected %s", "panic")
}
