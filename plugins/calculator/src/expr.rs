//! A small recursive-descent arithmetic evaluator.
//!
//! Grammar:
//! ```text
//! expr   := term (('+' | '-') term)*
//! term   := unary (('*' | '/' | '%') unary)*
//! unary  := ('-' | '+') unary | power
//! power  := atom ('^' unary)?
//! atom   := number | '(' expr ')'
//! ```

/// Longest accepted expression, in bytes.
pub const MAX_LEN: usize = 1000;
/// Deepest accepted nesting of parentheses and unary operators.
pub const MAX_DEPTH: usize = 64;

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The input is empty.
    #[error("empty expression")]
    Empty,
    /// The input is longer than [`MAX_LEN`].
    #[error("expression longer than {MAX_LEN} bytes")]
    TooLong,
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("expression nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A character or token that does not fit the grammar.
    #[error("unexpected {found} at position {position}")]
    Unexpected {
        /// What was found (a quoted character or "end of input").
        found: String,
        /// Byte offset in the expression.
        position: usize,
    },
    /// A malformed number.
    #[error("invalid number `{0}`")]
    BadNumber(String),
    /// `x / 0` or `x % 0`.
    #[error("division by zero")]
    DivisionByZero,
    /// The result overflowed or is undefined.
    #[error("result is not a finite number")]
    NotFinite,
}

/// Evaluates `expression`.
pub fn evaluate(expression: &str) -> Result<f64, EvalError> {
    if expression.len() > MAX_LEN {
        return Err(EvalError::TooLong);
    }
    if expression.trim().is_empty() {
        return Err(EvalError::Empty);
    }
    let mut parser = Parser {
        src: expression.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    parser.skip_spaces();
    if parser.pos < parser.src.len() {
        return Err(parser.unexpected());
    }
    finite(value)
}

/// Formats a result: whole numbers without a fractional part (`14`, not
/// `14.0`), others with Rust's shortest round-trip formatting.
pub fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

fn finite(value: f64) -> Result<f64, EvalError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(EvalError::NotFinite)
    }
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn skip_spaces(&mut self) {
        while self.pos < self.src.len() && self.src[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_spaces();
        self.src.get(self.pos).copied()
    }

    fn unexpected(&self) -> EvalError {
        let found = match std::str::from_utf8(&self.src[self.pos..])
            .ok()
            .and_then(|s| s.chars().next())
        {
            Some(c) => format!("'{c}'"),
            None if self.pos >= self.src.len() => "end of input".to_owned(),
            None => "non-UTF-8 byte".to_owned(),
        };
        EvalError::Unexpected {
            found,
            position: self.pos,
        }
    }

    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, EvalError>,
    ) -> Result<T, EvalError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(EvalError::TooDeep);
        }
        let out = f(self);
        self.depth -= 1;
        out
    }

    fn expr(&mut self) -> Result<f64, EvalError> {
        let mut value = self.term()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let rhs = self.term()?;
            value = finite(if op == b'+' { value + rhs } else { value - rhs })?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, EvalError> {
        let mut value = self.unary()?;
        while let Some(op @ (b'*' | b'/' | b'%')) = self.peek() {
            self.pos += 1;
            let rhs = self.unary()?;
            value = match op {
                b'*' => value * rhs,
                _ if rhs == 0.0 => return Err(EvalError::DivisionByZero),
                b'/' => value / rhs,
                _ => value % rhs,
            };
            value = finite(value)?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, EvalError> {
        match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                self.nested(|p| p.unary()).map(|v| -v)
            }
            Some(b'+') => {
                self.pos += 1;
                self.nested(|p| p.unary())
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<f64, EvalError> {
        let base = self.atom()?;
        if self.peek() == Some(b'^') {
            self.pos += 1;
            let exponent = self.nested(|p| p.unary())?;
            return finite(base.powf(exponent));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, EvalError> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let value = self.nested(|p| p.expr())?;
                if self.peek() != Some(b')') {
                    return Err(self.unexpected());
                }
                self.pos += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            _ => Err(self.unexpected()),
        }
    }

    fn number(&mut self) -> Result<f64, EvalError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            while p.pos < p.src.len() && (p.src[p.pos].is_ascii_digit() || p.src[p.pos] == b'.') {
                p.pos += 1;
            }
        };
        digits(self);
        if self.pos < self.src.len() && matches!(self.src[self.pos], b'e' | b'E') {
            self.pos += 1;
            if self.pos < self.src.len() && matches!(self.src[self.pos], b'+' | b'-') {
                self.pos += 1;
            }
            digits(self);
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).expect("ASCII digits");
        text.parse::<f64>()
            .map_err(|_| EvalError::BadNumber(text.to_owned()))
    }
}
