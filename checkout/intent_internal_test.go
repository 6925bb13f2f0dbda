package checkout

import "testing"

// A total in minor units is the policy's amount in major units of the
// currency's ISO 4217 minor unit; other codes are refused.
func TestAmountOf(t *testing.T) {
	for _, c := range []struct {
		minor int64
		code  string
		want  string
	}{
		{5400, "USD", "54.00"}, {5, "EUR", "0.05"}, {0, "USD", "0.00"}, {5400, "JPY", "5400"},
		{5400, "KWD", "5.400"}, {5400, "IQD", "5.400"}, {5400, "IDR", "54.00"}, {5400, "CLF", "0.5400"},
		{5400, "MRU", "54.00"}, {5400, "VES", "54.00"}, {9007199254740991, "USD", "90071992547409.91"},
	} {
		a, err := amountOf(c.minor, c.code)
		if err != nil || a.Raw != c.want || !a.Set {
			t.Errorf("%d %s: %+v %v, want %s", c.minor, c.code, a, err, c.want)
		}
	}
	for _, code := range []string{"usd", "US", "USDX", "DEM", "XXX", "XTS", "XAU", "XDR", "", "€"} {
		if _, err := amountOf(100, code); err == nil {
			t.Errorf("%q accepted", code)
		}
	}
	if _, err := amountOf(-1, "USD"); err == nil {
		t.Error("a negative total accepted")
	}
}
