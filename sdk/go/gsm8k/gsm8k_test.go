package gsm8k

import "testing"

func TestExtractAnswer(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"so #### 1,234 and #### 5", "1234", true},
		{"#### -7.5", "-7.5", true},
		{"####12", "", false},
		{"#### $12", "", false},
		{"no answer", "", false},
		{"#### - then #### 3", "3", true},
		{"##### 42", "42", true},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := ExtractAnswer(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ExtractAnswer(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestComputeScore(t *testing.T) {
	cases := []struct {
		truth, response string
		want            float64
	}{
		{"72", "48 + 24 = 72\n#### 72", 1},
		{"72", "#### 70", 0},
		{"72", "The answer is 72", 0},
		{"1234", "#### 1,234", 1},
		{"1234", "#### $1234", 0},
		{"-7.5", "so #### -7.5 and #### 3", 1},
		{"3", "#### - then #### 3", 1},
		{"42", "##### 42", 1},
		{"42", "", 0},
		{"72", "#### 72.0", 0},
	}
	for _, c := range cases {
		if got := ComputeScore(c.response, c.truth); got != c.want {
			t.Errorf("ComputeScore(%q, %q) = %v, want %v", c.response, c.truth, got, c.want)
		}
	}
	if got := ComputeScoreWith("#### 71", "72", 0.04, 1); got != 0.04 {
		t.Errorf("format score: %v", got)
	}
	if got := ComputeScoreWith("72", "72", 0.04, 1); got != 0 {
		t.Errorf("no answer: %v", got)
	}
}
