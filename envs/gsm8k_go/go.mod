module gsm8k_go

go 1.24

require skyrl.dev/sdk v0.0.0

// In this repository; `skyrl plugin build` supplies its embedded SDK instead.
replace skyrl.dev/sdk => ../../sdk/go
