//! The interactive form: one question per line, each answer checked at
//! once and the question asked again with the reason when it does not
//! pass, so a mistake costs one line, not the whole form.
//!
//! Plain line reading, not a terminal UI crate: it works the same in any
//! terminal, over ssh, in a pseudo-terminal under test, and with answers
//! piped in.

use std::io::{BufRead, Write};

use anyhow::{Context, bail};

/// Questions on `out`, answers from `input`.
pub struct Form<R, W> {
    input: R,
    out: W,
}

impl<R: BufRead, W: Write> Form<R, W> {
    /// A form reading `input` and writing to `out`.
    pub fn new(input: R, out: W) -> Self {
        Self { input, out }
    }

    /// Writes a line of text (a heading or a note).
    pub fn say(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.out, "{text}")?;
        self.out.flush()?;
        Ok(())
    }

    /// Asks `question` until `check` accepts the answer (`default` stands
    /// for an empty one). The end of input is an error: nobody is there to
    /// answer.
    pub fn ask<T>(
        &mut self,
        question: &str,
        default: Option<&str>,
        check: impl Fn(&str) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        loop {
            match default {
                Some(d) if !d.is_empty() => write!(self.out, "{question} [{d}]: ")?,
                _ => write!(self.out, "{question}: ")?,
            }
            self.out.flush()?;
            let mut line = String::new();
            let n = self
                .input
                .read_line(&mut line)
                .context("reading an answer")?;
            if n == 0 {
                bail!("no answer to {question:?} (end of input)");
            }
            let answer = line.trim();
            let answer = match default {
                Some(d) if answer.is_empty() => d,
                _ => answer,
            };
            match check(answer) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    writeln!(self.out, "  ✗ {e:#}. Please answer again.")?;
                }
            }
        }
    }

    /// Asks a yes/no question.
    pub fn confirm(&mut self, question: &str, default: bool) -> anyhow::Result<bool> {
        let d = if default { "Y/n" } else { "y/N" };
        self.ask(question, Some(d), |a| {
            let a = if a == d { "" } else { a };
            super::spec::yes_no(a, default)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_answer_is_asked_again_with_the_reason() {
        let input = b"get weather\nget-weather\n".as_slice();
        let mut out = Vec::new();
        let id = Form::new(input, &mut out)
            .ask("Skill id", None, super::super::spec::skill_id)
            .expect("answered");
        assert_eq!(id, "get-weather");
        let shown = String::from_utf8(out).expect("utf8");
        assert_eq!(shown.matches("Skill id: ").count(), 2, "{shown}");
        assert!(shown.contains("cannot contain spaces"), "{shown}");
    }

    #[test]
    fn the_end_of_input_is_an_error_not_a_loop() {
        let mut out = Vec::new();
        let r = Form::new(b"".as_slice(), &mut out).ask("Name", None, |a| Ok(a.to_owned()));
        assert!(r.is_err());
    }
}
