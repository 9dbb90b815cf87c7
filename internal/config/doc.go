// Package config is the provider's configuration, provider.yaml: its types, with the
// value types its settings are written in (Quantity, Coin), the reader (defaults, the
// file, then the environment; LoadProviderConfig), the checks that name the setting
// that is wrong (Validate, Check; a refusal is an Error), and the settings of each
// component derived from it (KubeSettings, EngineConfig, CheckerConfig, ...). The
// composition root (internal/app) builds the provider from a Checked configuration.
package config
