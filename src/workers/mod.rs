//! The background processes: the launcher (`launcher`), one worker per
//! database (`worker`), the one-shot failover step (`failover_step`), the
//! history's numbering (`numbering`), what they share (`bgworker`), and
//! the utility hook that tells them of CREATE/DROP (`hooks`).

pub mod bgworker;
pub mod failover_step;
pub mod hooks;
pub mod launcher;
pub mod numbering;
pub mod worker;
