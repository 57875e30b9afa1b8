#!/usr/bin/env python3
"""Builds the text2sql sample dataset: three small SQLite databases and
train.jsonl / val.jsonl rows in skyrl's dataset schema.

Layout (spider style, what the env reads as
`{db_file_path}/{data}/database/{db_id}/{db_id}.sqlite`):

    databases/sample/database/company/company.sqlite
    databases/sample/database/library/library.sqlite
    databases/sample/database/school/school.sqlite
    train.jsonl   (30 rows)
    val.jsonl     (9 rows)

Everything is fixed data (no randomness, no timestamps), so rerunning the
script with the same SQLite version rewrites identical files. Every gold SQL
is executed here and must return at least one row.

    python3 envs/text2sql/data/generate.py
"""

import json
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "sample"
DB_ROOT = os.path.join(HERE, "databases", DATA, "database")

# ---------------------------------------------------------------------------
# Databases: (db_id, schema DDL, {table: rows})
# ---------------------------------------------------------------------------

COMPANY_DDL = [
    """CREATE TABLE departments (
    dept_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    location TEXT NOT NULL,
    budget INTEGER NOT NULL
)""",
    """CREATE TABLE employees (
    emp_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    dept_id INTEGER NOT NULL REFERENCES departments(dept_id),
    title TEXT NOT NULL,
    hire_date TEXT NOT NULL,
    manager_id INTEGER REFERENCES employees(emp_id)
)""",
    """CREATE TABLE salaries (
    emp_id INTEGER NOT NULL REFERENCES employees(emp_id),
    year INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    PRIMARY KEY (emp_id, year)
)""",
]

DEPARTMENTS = [
    (1, "Engineering", "San Francisco", 1200000),
    (2, "Sales", "New York", 800000),
    (3, "Marketing", "New York", 450000),
    (4, "Finance", "Chicago", 380000),
    (5, "Human Resources", "Chicago", 250000),
    (6, "Support", "Austin", 300000),
]

# (emp_id, first, last, dept, title, hire_date, manager_id, base salary 2022)
EMPLOYEES = [
    (1, "Alice", "Nguyen", 1, "VP of Engineering", "2015-03-02", None, 210000),
    (2, "Brian", "Okafor", 1, "Staff Engineer", "2016-07-18", 1, 182000),
    (3, "Chloe", "Martin", 1, "Senior Engineer", "2018-01-08", 1, 158000),
    (4, "Diego", "Alvarez", 1, "Software Engineer", "2020-09-14", 2, 126000),
    (5, "Elena", "Petrova", 1, "Software Engineer", "2021-02-01", 2, 121000),
    (6, "Farid", "Haddad", 1, "Junior Engineer", "2022-06-20", 3, 98000),
    (7, "Grace", "Kim", 2, "Head of Sales", "2014-11-03", None, 175000),
    (8, "Hector", "Ramos", 2, "Account Executive", "2017-04-10", 7, 96000),
    (9, "Ivy", "Chen", 2, "Account Executive", "2019-08-26", 7, 91000),
    (10, "Jamal", "Wright", 2, "Sales Associate", "2021-10-04", 8, 64000),
    (11, "Keiko", "Tanaka", 2, "Sales Associate", "2022-03-28", 8, 62000),
    (12, "Liam", "O'Brien", 3, "Marketing Director", "2016-05-16", None, 150000),
    (13, "Maya", "Patel", 3, "Content Strategist", "2019-02-11", 12, 88000),
    (14, "Noah", "Schmidt", 3, "Designer", "2020-07-06", 12, 84000),
    (15, "Olivia", "Brown", 4, "CFO", "2013-09-09", None, 220000),
    (16, "Pedro", "Silva", 4, "Accountant", "2018-10-22", 15, 79000),
    (17, "Quinn", "Murphy", 4, "Financial Analyst", "2021-05-17", 15, 86000),
    (18, "Rosa", "Garcia", 5, "HR Manager", "2017-01-30", None, 105000),
    (19, "Samuel", "Lee", 5, "Recruiter", "2022-08-15", 18, 67000),
    (20, "Tara", "Singh", 6, "Support Lead", "2018-06-04", None, 82000),
    (21, "Umar", "Farouk", 6, "Support Specialist", "2020-11-30", 20, 56000),
    (22, "Vera", "Novak", 6, "Support Specialist", "2021-12-13", 20, 54000),
    (23, "Wes", "Turner", 6, "Support Specialist", "2023-02-27", 20, 52000),
    (24, "Xin", "Zhao", 1, "Senior Engineer", "2019-04-15", 1, 152000),
]


def company_rows():
    salaries = []
    for emp_id, _, _, _, _, hired, _, base in EMPLOYEES:
        for year in (2022, 2023, 2024):
            if int(hired[:4]) > year:
                continue
            # Fixed raises: 4% in 2023, 3% in 2024 (rounded to the dollar).
            amount = base
            if year >= 2023:
                amount = round(amount * 1.04)
            if year >= 2024:
                amount = round(amount * 1.03)
            salaries.append((emp_id, year, amount))
    return {
        "departments": DEPARTMENTS,
        "employees": [e[:7] for e in EMPLOYEES],
        "salaries": salaries,
    }


LIBRARY_DDL = [
    """CREATE TABLE authors (
    author_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT NOT NULL,
    birth_year INTEGER NOT NULL
)""",
    """CREATE TABLE books (
    book_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    author_id INTEGER NOT NULL REFERENCES authors(author_id),
    genre TEXT NOT NULL,
    published_year INTEGER NOT NULL,
    copies INTEGER NOT NULL
)""",
    """CREATE TABLE members (
    member_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    joined_date TEXT NOT NULL
)""",
    """CREATE TABLE loans (
    loan_id INTEGER PRIMARY KEY,
    book_id INTEGER NOT NULL REFERENCES books(book_id),
    member_id INTEGER NOT NULL REFERENCES members(member_id),
    loan_date TEXT NOT NULL,
    return_date TEXT
)""",
]

AUTHORS = [
    (1, "Jane Austen", "United Kingdom", 1775),
    (2, "Gabriel Garcia Marquez", "Colombia", 1927),
    (3, "Haruki Murakami", "Japan", 1949),
    (4, "Chimamanda Ngozi Adichie", "Nigeria", 1977),
    (5, "George Orwell", "United Kingdom", 1903),
    (6, "Toni Morrison", "United States", 1931),
    (7, "Italo Calvino", "Italy", 1923),
    (8, "Ursula K. Le Guin", "United States", 1929),
]

BOOKS = [
    (1, "Pride and Prejudice", 1, "Romance", 1813, 4),
    (2, "Emma", 1, "Romance", 1815, 2),
    (3, "Persuasion", 1, "Romance", 1817, 1),
    (4, "One Hundred Years of Solitude", 2, "Magical Realism", 1967, 3),
    (5, "Love in the Time of Cholera", 2, "Romance", 1985, 2),
    (6, "Norwegian Wood", 3, "Literary Fiction", 1987, 2),
    (7, "Kafka on the Shore", 3, "Magical Realism", 2002, 3),
    (8, "1Q84", 3, "Magical Realism", 2009, 1),
    (9, "Half of a Yellow Sun", 4, "Historical Fiction", 2006, 2),
    (10, "Americanah", 4, "Literary Fiction", 2013, 3),
    (11, "Nineteen Eighty-Four", 5, "Science Fiction", 1949, 5),
    (12, "Animal Farm", 5, "Satire", 1945, 4),
    (13, "Beloved", 6, "Historical Fiction", 1987, 2),
    (14, "Song of Solomon", 6, "Literary Fiction", 1977, 1),
    (15, "Invisible Cities", 7, "Literary Fiction", 1972, 2),
    (16, "If on a Winter's Night a Traveler", 7, "Literary Fiction", 1979, 1),
    (17, "A Wizard of Earthsea", 8, "Fantasy", 1968, 3),
    (18, "The Left Hand of Darkness", 8, "Science Fiction", 1969, 2),
    (19, "The Dispossessed", 8, "Science Fiction", 1974, 2),
]

MEMBERS = [
    (1, "Aaron Blake", "Springfield", "2019-01-15"),
    (2, "Bianca Rossi", "Springfield", "2019-06-02"),
    (3, "Carlos Mendes", "Riverton", "2020-03-11"),
    (4, "Dana Whitfield", "Riverton", "2020-09-27"),
    (5, "Emeka Obi", "Springfield", "2021-02-08"),
    (6, "Fiona Gallagher", "Lakeside", "2021-07-19"),
    (7, "Gustavo Lima", "Lakeside", "2022-01-05"),
    (8, "Hana Sato", "Springfield", "2022-05-30"),
    (9, "Isaac Levi", "Riverton", "2023-03-14"),
    (10, "Julia Novak", "Lakeside", "2023-10-01"),
]

# (book_id, member_id, loan_date, return_date or None)
LOANS = [
    (1, 1, "2023-01-04", "2023-01-20"),
    (11, 1, "2023-02-10", "2023-03-01"),
    (4, 2, "2023-01-12", "2023-02-02"),
    (7, 3, "2023-02-18", "2023-03-05"),
    (11, 4, "2023-03-02", "2023-03-19"),
    (17, 5, "2023-03-15", "2023-04-01"),
    (10, 6, "2023-04-01", "2023-04-22"),
    (1, 7, "2023-04-09", "2023-04-30"),
    (12, 8, "2023-05-03", "2023-05-10"),
    (6, 2, "2023-05-20", "2023-06-11"),
    (13, 3, "2023-06-01", "2023-06-25"),
    (11, 9, "2023-06-14", "2023-07-02"),
    (18, 5, "2023-07-07", "2023-07-28"),
    (4, 10, "2023-08-19", "2023-09-09"),
    (15, 1, "2023-09-02", "2023-09-16"),
    (9, 6, "2023-09-21", "2023-10-15"),
    (2, 8, "2023-10-05", "2023-10-26"),
    (7, 4, "2023-11-11", "2023-12-02"),
    (19, 7, "2023-12-01", "2023-12-20"),
    (11, 2, "2024-01-08", "2024-01-29"),
    (5, 3, "2024-01-15", None),
    (8, 9, "2024-01-22", None),
    (17, 1, "2024-02-01", "2024-02-18"),
    (1, 5, "2024-02-06", None),
    (14, 10, "2024-02-12", None),
    (12, 4, "2024-02-20", "2024-03-04"),
    (10, 8, "2024-02-27", None),
    (4, 6, "2024-03-01", None),
]


def library_rows():
    return {
        "authors": AUTHORS,
        "books": BOOKS,
        "members": MEMBERS,
        "loans": [(i, *loan) for i, loan in enumerate(LOANS, start=1)],
    }


SCHOOL_DDL = [
    """CREATE TABLE students (
    student_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    grade_level INTEGER NOT NULL,
    birth_date TEXT NOT NULL,
    email TEXT
)""",
    """CREATE TABLE courses (
    course_id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    department TEXT NOT NULL,
    credits INTEGER NOT NULL,
    teacher TEXT NOT NULL
)""",
    """CREATE TABLE enrollments (
    student_id INTEGER NOT NULL REFERENCES students(student_id),
    course_id INTEGER NOT NULL REFERENCES courses(course_id),
    term TEXT NOT NULL,
    score REAL,
    PRIMARY KEY (student_id, course_id, term)
)""",
]

STUDENTS = [
    (1, "Amelia Clarke", 9, "2009-02-14", "amelia.clarke@school.example"),
    (2, "Benjamin Osei", 9, "2009-07-03", "benjamin.osei@school.example"),
    (3, "Camila Reyes", 10, "2008-04-22", "camila.reyes@school.example"),
    (4, "Daniel Kowalski", 10, "2008-11-09", None),
    (5, "Emily Zhang", 11, "2007-01-30", "emily.zhang@school.example"),
    (6, "Felix Wagner", 11, "2007-08-17", "felix.wagner@school.example"),
    (7, "Gabriela Santos", 12, "2006-05-05", "gabriela.santos@school.example"),
    (8, "Henry Adeyemi", 12, "2006-12-28", None),
    (9, "Isla MacDonald", 9, "2009-10-11", "isla.macdonald@school.example"),
    (10, "Jonas Berg", 10, "2008-03-19", "jonas.berg@school.example"),
    (11, "Kavya Iyer", 11, "2007-06-25", "kavya.iyer@school.example"),
    (12, "Leo Moreau", 12, "2006-09-02", "leo.moreau@school.example"),
]

COURSES = [
    (1, "MATH101", "Algebra I", "Mathematics", 4, "Mr. Harris"),
    (2, "MATH201", "Geometry", "Mathematics", 4, "Ms. Liang"),
    (3, "MATH301", "Calculus", "Mathematics", 5, "Ms. Liang"),
    (4, "SCI110", "Biology", "Science", 4, "Dr. Evans"),
    (5, "SCI210", "Chemistry", "Science", 4, "Dr. Evans"),
    (6, "SCI310", "Physics", "Science", 5, "Mr. Okoro"),
    (7, "ENG100", "English Literature", "English", 3, "Mrs. Bell"),
    (8, "HIS100", "World History", "History", 3, "Mr. Novak"),
    (9, "ART100", "Studio Art", "Arts", 2, "Ms. Duarte"),
]

# (student_id, course_id, term, score or None while in progress)
ENROLLMENTS = [
    (1, 1, "2023-fall", 88.5), (1, 4, "2023-fall", 92.0), (1, 7, "2023-fall", 79.0),
    (1, 9, "2024-spring", None),
    (2, 1, "2023-fall", 71.0), (2, 4, "2023-fall", 65.5), (2, 8, "2024-spring", None),
    (3, 2, "2023-fall", 94.0), (3, 5, "2023-fall", 89.5), (3, 7, "2023-fall", 91.0),
    (3, 8, "2024-spring", 86.0),
    (4, 2, "2023-fall", 58.0), (4, 5, "2023-fall", 62.5), (4, 9, "2024-spring", 90.0),
    (5, 3, "2023-fall", 97.5), (5, 6, "2023-fall", 95.0), (5, 7, "2024-spring", 88.0),
    (6, 3, "2023-fall", 81.0), (6, 6, "2023-fall", 77.5), (6, 8, "2024-spring", None),
    (7, 3, "2023-fall", 84.0), (7, 6, "2023-fall", 90.5), (7, 7, "2023-fall", 93.0),
    (7, 9, "2024-spring", 96.0),
    (8, 6, "2023-fall", 68.0), (8, 8, "2023-fall", 74.5),
    (9, 1, "2023-fall", 99.0), (9, 4, "2023-fall", 96.5), (9, 9, "2024-spring", None),
    (10, 2, "2023-fall", 76.0), (10, 5, "2023-fall", 81.5), (10, 8, "2024-spring", 70.0),
    (11, 3, "2023-fall", 89.0), (11, 5, "2024-spring", 92.5), (11, 7, "2023-fall", 85.0),
    (12, 6, "2023-fall", 72.0), (12, 7, "2023-fall", 80.5), (12, 8, "2024-spring", 83.0),
]


def school_rows():
    return {"students": STUDENTS, "courses": COURSES, "enrollments": ENROLLMENTS}


DATABASES = [
    ("company", COMPANY_DDL, company_rows),
    ("library", LIBRARY_DDL, library_rows),
    ("school", SCHOOL_DDL, school_rows),
]

# ---------------------------------------------------------------------------
# Questions: (db_id, question, gold SQL)
# ---------------------------------------------------------------------------

QUESTIONS = [
    # company
    ("company", "How many employees work in the Engineering department?",
     "SELECT COUNT(*) FROM employees e JOIN departments d ON e.dept_id = d.dept_id WHERE d.name = 'Engineering';"),
    ("company", "List the first and last names of all employees who have no manager.",
     "SELECT first_name, last_name FROM employees WHERE manager_id IS NULL;"),
    ("company", "Which departments are located in Chicago? Give their names.",
     "SELECT name FROM departments WHERE location = 'Chicago';"),
    ("company", "What is the total 2024 salary paid in each department? Return the department name and the total.",
     "SELECT d.name, SUM(s.amount) FROM salaries s JOIN employees e ON s.emp_id = e.emp_id JOIN departments d ON e.dept_id = d.dept_id WHERE s.year = 2024 GROUP BY d.name;"),
    ("company", "Who was the highest-paid employee in 2023? Give the first name, last name and the salary.",
     "SELECT e.first_name, e.last_name, s.amount FROM employees e JOIN salaries s ON e.emp_id = s.emp_id WHERE s.year = 2023 ORDER BY s.amount DESC LIMIT 1;"),
    ("company", "List the first names of the employees who report to Brian Okafor.",
     "SELECT e.first_name FROM employees e JOIN employees m ON e.manager_id = m.emp_id WHERE m.first_name = 'Brian' AND m.last_name = 'Okafor';"),
    ("company", "How many employees were hired in 2021 or later?",
     "SELECT COUNT(*) FROM employees WHERE hire_date >= '2021-01-01';"),
    ("company", "Which departments have more than three employees? Give the department name and the number of employees.",
     "SELECT d.name, COUNT(*) FROM employees e JOIN departments d ON e.dept_id = d.dept_id GROUP BY d.dept_id HAVING COUNT(*) > 3;"),
    ("company", "What was the average 2022 salary of Software Engineers?",
     "SELECT AVG(s.amount) FROM salaries s JOIN employees e ON s.emp_id = e.emp_id WHERE e.title = 'Software Engineer' AND s.year = 2022;"),
    ("company", "Which department has the largest budget, and where is it located?",
     "SELECT name, location FROM departments ORDER BY budget DESC LIMIT 1;"),
    ("company", "List the last names of employees whose 2024 salary is above the company-wide 2024 average.",
     "SELECT e.last_name FROM employees e JOIN salaries s ON e.emp_id = s.emp_id WHERE s.year = 2024 AND s.amount > (SELECT AVG(amount) FROM salaries WHERE year = 2024);"),
    ("company", "Which employees have no 2022 salary record because they joined later? Give their first and last names.",
     "SELECT first_name, last_name FROM employees WHERE emp_id NOT IN (SELECT emp_id FROM salaries WHERE year = 2022);"),
    ("company", "How many distinct job titles are there in the Support department?",
     "SELECT COUNT(DISTINCT e.title) FROM employees e JOIN departments d ON e.dept_id = d.dept_id WHERE d.name = 'Support';"),
    # library
    ("library", "How many books written by Haruki Murakami does the library have?",
     "SELECT COUNT(*) FROM books b JOIN authors a ON b.author_id = a.author_id WHERE a.name = 'Haruki Murakami';"),
    ("library", "List the titles of books that are currently on loan (not yet returned).",
     "SELECT b.title FROM loans l JOIN books b ON l.book_id = b.book_id WHERE l.return_date IS NULL;"),
    ("library", "Which book has been borrowed the most times? Give its title and the number of loans.",
     "SELECT b.title, COUNT(*) AS n FROM loans l JOIN books b ON l.book_id = b.book_id GROUP BY b.book_id ORDER BY n DESC LIMIT 1;"),
    ("library", "What is the total number of copies of Science Fiction books?",
     "SELECT SUM(copies) FROM books WHERE genre = 'Science Fiction';"),
    ("library", "List the names of authors from the United Kingdom.",
     "SELECT name FROM authors WHERE country = 'United Kingdom';"),
    ("library", "Which members live in Riverton? Give their names.",
     "SELECT name FROM members WHERE city = 'Riverton';"),
    ("library", "How many loans did each member make? Return the member name and the count.",
     "SELECT m.name, COUNT(l.loan_id) FROM members m LEFT JOIN loans l ON m.member_id = l.member_id GROUP BY m.member_id;"),
    ("library", "List the titles of books that have never been borrowed.",
     "SELECT title FROM books WHERE book_id NOT IN (SELECT book_id FROM loans);"),
    ("library", "What is the oldest book in the library? Give the title and the publication year.",
     "SELECT title, published_year FROM books ORDER BY published_year ASC LIMIT 1;"),
    ("library", "For each genre, how many books are there? Return the genre and the count.",
     "SELECT genre, COUNT(*) FROM books GROUP BY genre;"),
    ("library", "Which members borrowed a book by George Orwell? Give each member's name once.",
     "SELECT DISTINCT m.name FROM loans l JOIN books b ON l.book_id = b.book_id JOIN authors a ON b.author_id = a.author_id JOIN members m ON l.member_id = m.member_id WHERE a.name = 'George Orwell';"),
    ("library", "How many loans were made in 2023?",
     "SELECT COUNT(*) FROM loans WHERE loan_date BETWEEN '2023-01-01' AND '2023-12-31';"),
    ("library", "Which authors were born before 1930? Give their names and birth years.",
     "SELECT name, birth_year FROM authors WHERE birth_year < 1930;"),
    ("library", "What is the average number of days a book was kept, over all returned loans?",
     "SELECT AVG(julianday(return_date) - julianday(loan_date)) FROM loans WHERE return_date IS NOT NULL;"),
    # school
    ("school", "How many students are in grade 10?",
     "SELECT COUNT(*) FROM students WHERE grade_level = 10;"),
    ("school", "List the titles of the courses taught by Ms. Liang.",
     "SELECT title FROM courses WHERE teacher = 'Ms. Liang';"),
    ("school", "Which students have no email address on file? Give their names.",
     "SELECT name FROM students WHERE email IS NULL;"),
    ("school", "What is the average score in Calculus, ignoring enrollments without a score?",
     "SELECT AVG(e.score) FROM enrollments e JOIN courses c ON e.course_id = c.course_id WHERE c.title = 'Calculus' AND e.score IS NOT NULL;"),
    ("school", "Which student got the highest score in any single course? Give the student name, the course title and the score.",
     "SELECT s.name, c.title, e.score FROM enrollments e JOIN students s ON e.student_id = s.student_id JOIN courses c ON e.course_id = c.course_id ORDER BY e.score DESC LIMIT 1;"),
    ("school", "How many students are enrolled in each course? Return the course code and the number of students.",
     "SELECT c.code, COUNT(DISTINCT e.student_id) FROM courses c JOIN enrollments e ON c.course_id = e.course_id GROUP BY c.course_id;"),
    ("school", "List the names of students taking a Science department course.",
     "SELECT DISTINCT s.name FROM students s JOIN enrollments e ON s.student_id = e.student_id JOIN courses c ON e.course_id = c.course_id WHERE c.department = 'Science';"),
    ("school", "What is the total number of credits of the courses Emily Zhang is enrolled in?",
     "SELECT SUM(c.credits) FROM enrollments e JOIN courses c ON e.course_id = c.course_id JOIN students s ON e.student_id = s.student_id WHERE s.name = 'Emily Zhang';"),
    ("school", "Which courses have an average score below 80? Give the course title and the average score.",
     "SELECT c.title, AVG(e.score) FROM enrollments e JOIN courses c ON e.course_id = c.course_id GROUP BY c.course_id HAVING AVG(e.score) < 80;"),
    ("school", "Which enrollments in the 2024-spring term are still in progress (no score yet)? Give the student name and the course title.",
     "SELECT s.name, c.title FROM enrollments e JOIN students s ON e.student_id = s.student_id JOIN courses c ON e.course_id = c.course_id WHERE e.term = '2024-spring' AND e.score IS NULL;"),
    ("school", "How many students were born in 2007?",
     "SELECT COUNT(*) FROM students WHERE birth_date LIKE '2007-%';"),
    ("school", "Which teacher teaches the most credits in total? Give the teacher and the total credits.",
     "SELECT teacher, SUM(credits) AS total FROM courses GROUP BY teacher ORDER BY total DESC LIMIT 1;"),
]

def split_of(i):
    """Question i goes to val when i % 13 is 3, 7 or 11: 9 of the 39."""
    return "val" if i % 13 in (3, 7, 11) else "train"


# ---------------------------------------------------------------------------
# Prompt (after SkyRL-SQL's multi-turn prompt)
# ---------------------------------------------------------------------------

SYSTEM = """Task Overview:
You are a data science expert. You are given a database schema and a natural language question. Your task is to understand the schema and write a valid SQLite query that answers the question, within a limited number of turns. Break the problem down, reason step by step, and explore the database with SQL when it helps.

Format:
- Think inside <think>...</think> blocks every time you receive a new observation or piece of information.
- To explore or check something, write one SQL query inside a single <sql>your sql</sql> block. Its result is shown to you as a dataframe inside <observation>...</observation>; think again based on it and refine.
- Long results are truncated to 50 rows.
- When no more exploration is needed, or you reach the last turn, you MUST give the final SQL query inside <solution>...</solution>.

------------------------ START OF EXAMPLE ------------------------
Question: how many pigs are in the farm?
    Database Schema:
    Table: animals
    - id (INTEGER, PRIMARY KEY)
    - species (TEXT)
    - age (INTEGER)
    - name (TEXT)

<think>I need to count the pigs. First I check that the animals table has rows with species = 'pig'.</think>
<sql>SELECT COUNT(*) FROM animals WHERE species = 'pig';</sql>
<observation>
COUNT(*)
      12
</observation>
<think>There are 12 pigs. The question only asks for the count, so this query is the answer.</think>
<solution>SELECT COUNT(*) FROM animals WHERE species = 'pig';</solution>
------------------------ END OF EXAMPLE ------------------------"""

USER = """Database Engine:
SQLite

Database Schema:
{schema}
This schema describes the database's structure, including tables, columns, primary keys, foreign keys, and any relevant relationships or constraints.

Question:
{question}

Instructions:
- Output only the information the question asks for: if it asks for a specific column, select only that column, nothing more.
- The query should return all of the requested information, without anything missing or extra.
- Before writing the final query, think through how to write it: analyse the question, summarise what you found, check each step, fix mistakes, and decide which SQL to run next.
- Use the SQLite dialect."""


def build_database(db_id, ddl, rows_fn):
    folder = os.path.join(DB_ROOT, db_id)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{db_id}.sqlite")
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    for stmt in ddl:
        conn.execute(stmt)
    for table, rows in rows_fn().items():
        marks = ", ".join("?" * len(rows[0]))
        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    conn.commit()
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.execute("VACUUM")
    conn.close()
    return path


def schema_of(path):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    stmts = [r[0] for r in conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL ORDER BY rowid")]
    conn.close()
    return ";\n\n".join(stmts) + ";\n"


def check_gold(path, sql):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = conn.execute(sql).fetchall()
    conn.close()
    if not rows:
        raise SystemExit(f"gold SQL returns no rows: {sql}")


def main():
    paths, schemas = {}, {}
    for db_id, ddl, rows_fn in DATABASES:
        paths[db_id] = build_database(db_id, ddl, rows_fn)
        schemas[db_id] = schema_of(paths[db_id])

    splits = {"train": [], "val": []}
    for i, (db_id, question, gold) in enumerate(QUESTIONS):
        check_gold(paths[db_id], gold)
        split = split_of(i)
        splits[split].append({
            "data_source": "text2sql_sample",
            "prompt": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": USER.format(schema=schemas[db_id], question=question)},
            ],
            "env_class": "text2sql",
            "reward_spec": {"method": "rule", "ground_truth": gold},
            "db_id": db_id,
            "data": DATA,
            "extra_info": {"question": question, "split": split, "index": len(splits[split])},
        })
    for split, rows in splits.items():
        with open(os.path.join(HERE, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"wrote {len(rows)} rows to {split}.jsonl")


if __name__ == "__main__":
    main()
