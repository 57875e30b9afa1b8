//! The `/retrieve` wire format. Requests: Search-R1's / SkyRL's
//! `{"queries": [...], "topk": 3, "return_scores": true}` or skyrl-gym
//! 0.4.0's `{"query": "..." | [...], ...}`. Responses:
//! `{"result": [[{"document": {...}, "score": 1.2}, ...], ...]}`, one list
//! per query, best first; bare documents without `return_scores`.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::index::Index;

/// Largest `topk` a request may ask for.
pub const MAX_TOPK: usize = 100;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The body is not JSON (HTTP 400).
    #[error("the body is not valid JSON: {0}")]
    Syntax(String),
    /// The body is JSON of the wrong shape (HTTP 422); the message names the
    /// field.
    #[error("{0}")]
    Invalid(String),
}

/// One query or several.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged, expecting = "a string or a list of strings")]
pub enum Queries {
    /// `"query": "..."`.
    One(String),
    /// `"query": [...]` / `"queries": [...]`.
    Many(Vec<String>),
}

/// A `/retrieve` body as sent; unknown fields are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct RawRequest {
    /// skyrl-gym 0.4.0: one query, or a list.
    #[serde(default)]
    pub query: Option<Queries>,
    /// Search-R1 / SkyRL: a list of queries.
    #[serde(default)]
    pub queries: Option<Vec<String>>,
    /// Passages per query (default: the server's `--topk`).
    #[serde(default)]
    pub topk: Option<usize>,
    /// Wrap each passage as `{"document", "score"}`.
    #[serde(default)]
    pub return_scores: Option<bool>,
}

/// A checked request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The queries, in order.
    pub queries: Vec<String>,
    /// Passages per query, 1..=[`MAX_TOPK`].
    pub topk: usize,
    /// Whether each passage comes with its score.
    pub return_scores: bool,
}

impl Request {
    /// Parses and checks a body; `default_topk` stands in for a missing or
    /// null `topk`.
    pub fn parse(body: &[u8], default_topk: usize) -> Result<Self, RequestError> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| RequestError::Syntax(e.to_string()))?;
        if !value.is_object() {
            return Err(RequestError::Invalid(format!(
                "the body must be a JSON object, got {}",
                kind(&value)
            )));
        }
        let raw: RawRequest = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            RequestError::Invalid(format!("`{path}`: {}", e.into_inner()))
        })?;
        raw.check(default_topk)
    }
}

/// What kind of JSON value `v` is, for messages.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

impl RawRequest {
    /// Exactly one of `query` / `queries`, and `topk` in range.
    pub fn check(self, default_topk: usize) -> Result<Request, RequestError> {
        let queries = match (self.query, self.queries) {
            (Some(Queries::One(q)), None) => vec![q],
            (Some(Queries::Many(qs)), None) | (None, Some(qs)) => qs,
            (Some(_), Some(_)) => {
                return Err(RequestError::Invalid(
                    "give either `queries` or `query`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(RequestError::Invalid(
                    "missing field `queries` (a list of strings; or `query`, a string)".into(),
                ))
            }
        };
        let topk = self.topk.unwrap_or(default_topk);
        if !(1..=MAX_TOPK).contains(&topk) {
            return Err(RequestError::Invalid(format!(
                "`topk` must be between 1 and {MAX_TOPK}, got {topk}"
            )));
        }
        Ok(Request {
            queries,
            topk,
            return_scores: self.return_scores.unwrap_or(false),
        })
    }
}

/// A passage with its score (`return_scores: true`).
#[derive(Debug, Serialize)]
pub struct Scored<'a> {
    /// The corpus line.
    pub document: &'a RawValue,
    /// Its BM25 score.
    pub score: f32,
}

/// The passages of one query.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Passages<'a> {
    /// `[{"document": {...}, "score": s}, ...]`.
    Scored(Vec<Scored<'a>>),
    /// `[{...}, ...]`.
    Bare(Vec<&'a RawValue>),
}

/// The `/retrieve` answer.
#[derive(Debug, Serialize)]
pub struct Response<'a> {
    /// One entry per query, in request order.
    pub result: Vec<Passages<'a>>,
}

/// Runs every query of `request` against `index`.
pub fn answer<'a>(index: &'a Index, request: &Request) -> Response<'a> {
    let result = request
        .queries
        .iter()
        .map(|q| {
            let hits = index.search(q, request.topk);
            if request.return_scores {
                Passages::Scored(
                    hits.iter()
                        .map(|h| Scored {
                            document: index.passage(h.passage),
                            score: h.score,
                        })
                        .collect(),
                )
            } else {
                Passages::Bare(hits.iter().map(|h| index.passage(h.passage)).collect())
            }
        })
        .collect();
    Response { result }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::index::tests::index_of;

    fn parse(body: Value) -> Result<Request, RequestError> {
        Request::parse(body.to_string().as_bytes(), 3)
    }

    fn invalid(body: Value) -> String {
        match parse(body) {
            Err(RequestError::Invalid(m)) => m,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn accepts_both_request_shapes() {
        let searchr1 = parse(json!({"queries": ["a", "b"], "topk": 5, "return_scores": true}));
        assert_eq!(
            searchr1.unwrap(),
            Request {
                queries: vec!["a".into(), "b".into()],
                topk: 5,
                return_scores: true
            }
        );
        let gym = parse(json!({"query": "a", "topk": 2, "return_scores": true})).unwrap();
        assert_eq!(gym.queries, ["a"]);
        assert_eq!(gym.topk, 2);
        let list = parse(json!({"query": ["a", "b"]})).unwrap();
        assert_eq!(list.queries, ["a", "b"]);
    }

    #[test]
    fn defaults_and_ignored_fields() {
        let r = parse(json!({"queries": ["a"], "topk": null, "extra": {"x": 1}})).unwrap();
        assert_eq!(r.topk, 3);
        assert!(!r.return_scores);
        assert_eq!(Request::parse(br#"{"queries": []}"#, 7).unwrap().topk, 7);
    }

    #[test]
    fn exactly_one_of_query_and_queries() {
        assert!(invalid(json!({"topk": 3})).contains("`queries`"));
        assert!(invalid(json!({"query": "a", "queries": ["b"]})).contains("not both"));
    }

    #[test]
    fn topk_out_of_range_is_refused() {
        assert!(invalid(json!({"queries": ["a"], "topk": 0})).contains("`topk`"));
        assert!(invalid(json!({"queries": ["a"], "topk": 101})).contains("`topk`"));
        assert!(invalid(json!({"queries": ["a"], "topk": -1})).contains("`topk`"));
        assert_eq!(
            parse(json!({"queries": ["a"], "topk": 100})).unwrap().topk,
            100
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let m = invalid(json!({"queries": "a"}));
        assert!(m.starts_with("`queries`"), "{m}");
        let m = invalid(json!({"query": 5}));
        assert!(
            m.contains("`query`") && m.contains("a string or a list"),
            "{m}"
        );
        let m = invalid(json!({"queries": ["a"], "return_scores": "yes"}));
        assert!(m.contains("`return_scores`"), "{m}");
        assert!(invalid(json!(["a"])).contains("JSON object"));
    }

    #[test]
    fn malformed_json_is_a_syntax_error() {
        assert!(matches!(
            Request::parse(b"{\"queries\": [", 3),
            Err(RequestError::Syntax(_))
        ));
        assert!(matches!(
            Request::parse(b"", 3),
            Err(RequestError::Syntax(_))
        ));
        assert!(matches!(
            Request::parse(b"{\"queries\": []} trailing", 3),
            Err(RequestError::Syntax(_))
        ));
    }

    #[test]
    fn answers_with_or_without_scores() {
        let index = index_of(&[
            ("0", "\"Paris\"\nParis is the capital of France."),
            ("1", "\"Rome\"\nRome is the capital of Italy."),
        ]);
        let request = Request {
            queries: vec!["capital of France".into(), "Italy".into()],
            topk: 1,
            return_scores: true,
        };
        let scored = serde_json::to_value(answer(&index, &request)).unwrap();
        let first = &scored["result"][0][0];
        assert_eq!(first["document"]["id"], "0");
        assert!(first["score"].as_f64().unwrap() > 0.0);
        assert_eq!(scored["result"][1][0]["document"]["id"], "1");
        assert_eq!(scored["result"][0].as_array().unwrap().len(), 1);

        let bare = serde_json::to_value(answer(
            &index,
            &Request {
                return_scores: false,
                ..request
            },
        ))
        .unwrap();
        assert_eq!(
            bare["result"][0][0],
            json!({"id": "0", "contents": "\"Paris\"\nParis is the capital of France."})
        );
    }
}
