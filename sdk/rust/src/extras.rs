//! Access to the env config and the dataset row's extras.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{Error, Result};

/// The dataset row's extras: every column except `prompt` and `env_class`
/// (`reward_spec`, `extra_info`, ...), plus `max_turns` set by the generator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras(Map<String, Value>);

impl Extras {
    /// Parses the extras JSON the host passes; an empty string means `{}`.
    pub fn from_json(json: &str) -> Result<Self> {
        parse_object(json, "extras").map(Self)
    }

    /// Wraps an already parsed JSON object.
    pub fn from_map(map: Map<String, Value>) -> Self {
        Self(map)
    }

    /// The whole extras object.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// A top-level field.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// `reward_spec`, if present.
    pub fn reward_spec(&self) -> Option<&Value> {
        self.get("reward_spec")
    }

    /// `extra_info`, if present.
    pub fn extra_info(&self) -> Option<&Value> {
        self.get("extra_info")
    }

    /// `reward_spec.ground_truth`, if present.
    pub fn ground_truth(&self) -> Option<&Value> {
        self.reward_spec()?.get("ground_truth")
    }

    /// `reward_spec.ground_truth` as text: strings as they are, numbers and
    /// booleans in their JSON spelling. Missing or structured values are an
    /// [`Error::InvalidConfig`].
    pub fn ground_truth_str(&self) -> Result<String> {
        let value = self
            .ground_truth()
            .ok_or_else(|| Error::config("extras.reward_spec.ground_truth is required"))?;
        value_as_text(value).ok_or_else(|| {
            Error::config(format!(
                "extras.reward_spec.ground_truth must be a string or number, got {value}"
            ))
        })
    }

    /// `max_turns` (set by the generator), falling back to
    /// `extra_info.max_turns`; integers or numeric strings, at least 1.
    pub fn max_turns(&self) -> Result<Option<u32>> {
        let value = match self.get("max_turns") {
            Some(v) => v,
            None => match self.extra_info().and_then(|e| e.get("max_turns")) {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        let turns = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match turns {
            Some(t) if (1..=u64::from(u32::MAX)).contains(&t) => Ok(Some(t as u32)),
            _ => Err(Error::config(format!(
                "max_turns must be a positive integer, got {value}"
            ))),
        }
    }
}

/// Deserializes an env config (or any JSON value) into `T`, reporting
/// failures as [`Error::InvalidConfig`]. A `null` config reads as `{}`.
pub fn parse_config<T: DeserializeOwned>(config: &Value) -> Result<T> {
    let value = if config.is_null() {
        Value::Object(Map::new())
    } else {
        config.clone()
    };
    serde_json::from_value(value).map_err(|e| Error::config(format!("env config: {e}")))
}

/// Parses a JSON object handed over by the host; empty text means `{}`.
pub(crate) fn parse_object(json: &str, what: &str) -> Result<Map<String, Value>> {
    if json.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(Error::config(format!(
            "{what} must be a JSON object, got {other}"
        ))),
        Err(e) => Err(Error::config(format!("{what} is not valid JSON: {e}"))),
    }
}

/// Strings as they are, numbers and booleans in their JSON spelling.
fn value_as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn extras(v: Value) -> Extras {
        Extras::from_json(&v.to_string()).unwrap()
    }

    #[test]
    fn ground_truth_reads_strings_and_numbers() {
        assert_eq!(
            extras(json!({"reward_spec": {"ground_truth": "72"}}))
                .ground_truth_str()
                .unwrap(),
            "72"
        );
        assert_eq!(
            extras(json!({"reward_spec": {"ground_truth": 72}}))
                .ground_truth_str()
                .unwrap(),
            "72"
        );
    }

    #[test]
    fn missing_ground_truth_is_a_config_error() {
        let err = extras(json!({"reward_spec": {}}))
            .ground_truth_str()
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidConfig(ref m) if m.contains("ground_truth")),
            "{err}"
        );
        let err = extras(json!({"reward_spec": {"ground_truth": [1]}}))
            .ground_truth_str()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)));
    }

    #[test]
    fn max_turns_prefers_top_level_then_extra_info() {
        assert_eq!(extras(json!({})).max_turns().unwrap(), None);
        assert_eq!(
            extras(json!({"max_turns": 3})).max_turns().unwrap(),
            Some(3)
        );
        assert_eq!(
            extras(json!({"max_turns": "4"})).max_turns().unwrap(),
            Some(4)
        );
        assert_eq!(
            extras(json!({"extra_info": {"max_turns": 2}}))
                .max_turns()
                .unwrap(),
            Some(2)
        );
        assert_eq!(
            extras(json!({"max_turns": 1, "extra_info": {"max_turns": 2}}))
                .max_turns()
                .unwrap(),
            Some(1)
        );
        assert!(extras(json!({"max_turns": 0})).max_turns().is_err());
        assert!(extras(json!({"max_turns": "many"})).max_turns().is_err());
    }

    #[test]
    fn extras_must_be_an_object() {
        assert_eq!(Extras::from_json("").unwrap(), Extras::default());
        assert!(matches!(
            Extras::from_json("[1]"),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            Extras::from_json("{"),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn parse_config_maps_errors() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        struct Cfg {
            #[serde(default)]
            n: u32,
        }
        assert_eq!(parse_config::<Cfg>(&Value::Null).unwrap().n, 0);
        assert_eq!(parse_config::<Cfg>(&json!({"n": 3})).unwrap().n, 3);
        assert!(matches!(
            parse_config::<Cfg>(&json!({"m": 3})),
            Err(Error::InvalidConfig(_))
        ));
    }
}
