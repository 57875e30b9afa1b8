use calculator::{evaluate, format_number, Calculator, EvalError, MAX_DEPTH, MAX_LEN};
use serde_json::json;
use skyrl_sdk::{call_with, specs_of, Error, Tool};

fn eval(s: &str) -> String {
    format_number(evaluate(s).unwrap())
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(eval("2 + 3 * 4"), "14");
    assert_eq!(eval("(2 + 3) * 4"), "20");
    assert_eq!(eval("10 - 4 - 3"), "3");
    assert_eq!(eval("2 ^ 3 ^ 2"), "512");
    assert_eq!(eval("-2 ^ 2"), "-4");
    assert_eq!(eval("2 ^ -1"), "0.5");
    assert_eq!(eval("7 % 4 + 10 / 4"), "5.5");
    assert_eq!(eval("--3"), "3");
    assert_eq!(eval(" 1.5e3 + .5 "), "1500.5");
    assert_eq!(eval("48 / 2 + 24"), "48");
}

#[test]
fn bad_input_is_rejected_with_a_reason() {
    assert_eq!(evaluate(""), Err(EvalError::Empty));
    assert_eq!(evaluate("1 / 0"), Err(EvalError::DivisionByZero));
    assert_eq!(evaluate("5 % 0"), Err(EvalError::DivisionByZero));
    assert_eq!(evaluate("10 ^ 400"), Err(EvalError::NotFinite));
    assert_eq!(evaluate("1.2.3"), Err(EvalError::BadNumber("1.2.3".into())));
    assert!(
        matches!(evaluate("2 +"), Err(EvalError::Unexpected { ref found, .. }) if found == "end of input")
    );
    assert!(matches!(
        evaluate("(1 + 2"),
        Err(EvalError::Unexpected { .. })
    ));
    assert!(matches!(
        evaluate("1 + 2)"),
        Err(EvalError::Unexpected { position: 5, .. })
    ));
    assert!(matches!(
        evaluate("__import__('os')"),
        Err(EvalError::Unexpected { position: 0, .. })
    ));
    assert!(matches!(
        evaluate("1,000"),
        Err(EvalError::Unexpected { .. })
    ));
    assert_eq!(evaluate(&"1+".repeat(MAX_LEN)), Err(EvalError::TooLong));
    assert_eq!(
        evaluate(&format!(
            "{}1{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        )),
        Err(EvalError::TooDeep)
    );
    assert_eq!(
        evaluate(&"-".repeat(MAX_DEPTH + 1)),
        Err(EvalError::TooDeep)
    );
}

#[test]
fn tool_call_reads_the_expression_argument() {
    assert_eq!(
        Calculator::call("calculator", &json!({"expression": "6 * 7"})).unwrap(),
        "42"
    );
    assert!(matches!(
        Calculator::call("calculator", &json!({"expr": "1"})),
        Err(Error::InvalidInput(_))
    ));
    assert!(
        matches!(Calculator::call("calculator", &json!({"expression": "1/0"})), Err(Error::InvalidInput(m)) if m.contains("division"))
    );
}

#[test]
fn glue_checks_names_and_json() {
    let specs = specs_of::<Calculator>();
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].name, "calculator");
    let schema: serde_json::Value = serde_json::from_str(&specs[0].parameters_json).unwrap();
    assert_eq!(schema["required"], json!(["expression"]));
    assert_eq!(
        call_with::<Calculator>("calculator", r#"{"expression": "1+1"}"#).unwrap(),
        "2"
    );
    assert!(call_with::<Calculator>("python", "{}").is_err());
    assert!(call_with::<Calculator>("calculator", "not json").is_err());
}
