//! Status a plugin offers to the admin console: plain data, no UI. `buzz-admin` draws it.

/// One plugin's status: labelled values and small tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminPanel {
    /// `label → value`, in display order.
    pub facts: Vec<(String, String)>,
    pub tables: Vec<AdminTable>,
}

/// A small table (a few dozen rows at most: the console is not a query tool).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminTable {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl AdminPanel {
    pub fn fact(mut self, label: impl Into<String>, value: impl ToString) -> AdminPanel {
        self.facts.push((label.into(), value.to_string()));
        self
    }

    pub fn table(mut self, table: AdminTable) -> AdminPanel {
        self.tables.push(table);
        self
    }
}
